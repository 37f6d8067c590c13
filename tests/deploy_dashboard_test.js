// Offline checks of the Grafana dashboard deploy/grafana/dashboards/asgd.json:
//  * it validates against Grafana's dashboard JSON schema (deploy/grafana/schema/, draft-07,
//    with ajv),
//  * every panel and every query uses the provisioned Prometheus datasource (uid
//    asgd-prometheus, as in deploy/grafana/provisioning/datasources/prometheus.yml),
//  * every query is plain PromQL (no Grafana $variables) that `promtool check rules`
//    accepts,
//  * every asgd_* metric a query (or an alert in deploy/prometheus/alerts.yml) names is
//    documented in docs/metrics.md (after stripping _bucket/_sum/_count), and every label
//    it groups, filters or names in a legend exists on those metrics.
// Run: tests/deploy_node_test.sh tests/deploy_dashboard_test.js [DASHBOARD.json]
// (Bazel: //tests:deploy_dashboard_test).
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { Checks, readText, requireValidatorPackage, run } = require("./deploy_testlib.js");

const Ajv = requireValidatorPackage("ajv");
const yaml = requireValidatorPackage("js-yaml");

const DASHBOARD = process.argv[2] || "deploy/grafana/dashboards/asgd.json";
const SCHEMA = "deploy/grafana/schema/dashboard.jsonschema.json";
const DATASOURCES = "deploy/grafana/provisioning/datasources/prometheus.yml";
const ALERTS = "deploy/prometheus/alerts.yml";
// docs/metrics.md is read from the runfiles when a BUILD file exports it, else from the
// source tree (tests/deploy_node_test.sh sets ASGD_REPO_ROOT).
const METRICS_DOC = fs.existsSync("docs/metrics.md")
  ? "docs/metrics.md"
  : path.join(process.env.ASGD_REPO_ROOT || ".", "docs/metrics.md");
const DATASOURCE_UID = "asgd-prometheus";
// Labels Prometheus attaches to every series (target labels of both
// deploy/prometheus/prometheus.yml and deploy/k8s/prometheus-config.yaml).
const TARGET_LABELS = ["job", "instance", "component", "namespace", "pod"];

const checks = new Checks("deploy_dashboard_test");

let dashboard;
checks.check("dashboard is valid JSON", () => {
  dashboard = JSON.parse(readText(DASHBOARD));
});
if (!dashboard) checks.finish();

checks.check("dashboard validates against Grafana's dashboard JSON schema", () => {
  const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
  const validate = ajv.compile(JSON.parse(readText(SCHEMA)));
  if (validate(dashboard)) return [];
  // oneOf(Panel, RowPanel) reports both branches; the Panel branch is the useful one
  // for a non-row panel, so show everything but keep it short.
  return validate.errors.slice(0, 20).map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
});

// Panels, including those nested in (collapsed) rows.
function allPanels(list) {
  const out = [];
  for (const p of list || []) {
    out.push(p);
    if (p.type === "row") out.push(...allPanels(p.panels));
  }
  return out;
}
const panels = allPanels(dashboard.panels);
const queryPanels = panels.filter((p) => p.type !== "row");
const targets = [];
for (const p of queryPanels) for (const t of p.targets || []) targets.push({ panel: p, target: t });

checks.check("the provisioned datasource has uid asgd-prometheus", () => {
  const ds = (yaml.load(readText(DATASOURCES)).datasources || []).find((d) => d.type === "prometheus");
  if (!ds) return [`${DATASOURCES} provisions no prometheus datasource`];
  return ds.uid === DATASOURCE_UID ? [] : [`${DATASOURCES}: uid is ${ds.uid}, not ${DATASOURCE_UID}`];
});

checks.check("every panel and every query uses datasource uid asgd-prometheus", () => {
  const problems = [];
  const bad = (ds) => !ds || ds.uid !== DATASOURCE_UID || (ds.type && ds.type !== "prometheus");
  for (const p of queryPanels) {
    if (bad(p.datasource)) problems.push(`panel "${p.title}": datasource ${JSON.stringify(p.datasource)}`);
    if (!p.targets || p.targets.length === 0) problems.push(`panel "${p.title}" has no queries`);
  }
  for (const { panel, target } of targets) {
    if (bad(target.datasource)) {
      problems.push(`panel "${panel.title}" query ${target.refId}: datasource ${JSON.stringify(target.datasource)}`);
    }
  }
  for (const p of panels.filter((x) => x.type === "row")) {
    if (p.datasource && bad(p.datasource)) problems.push(`row "${p.title}": datasource ${JSON.stringify(p.datasource)}`);
  }
  return problems;
});

checks.check("panel ids are unique and every panel has a title", () => {
  const problems = [];
  const seen = new Set();
  for (const p of panels) {
    if (seen.has(p.id)) problems.push(`panel id ${p.id} is used twice`);
    seen.add(p.id);
    if (!p.title) problems.push(`panel ${p.id} has no title`);
  }
  return problems;
});

checks.check("queries are plain PromQL without Grafana variables", () => {
  const problems = [];
  for (const { panel, target } of targets) {
    if (typeof target.expr !== "string" || target.expr.trim() === "") {
      problems.push(`panel "${panel.title}" query ${target.refId} has no expr`);
    } else if (target.expr.includes("$")) {
      problems.push(`panel "${panel.title}" query ${target.refId} uses a variable: ${target.expr}`);
    }
  }
  return problems;
});

// Alert expressions are checked alongside the dashboard's (names and labels below).
const alertExprs = [];
checks.check("alerts.yml parses", () => {
  for (const g of yaml.load(readText(ALERTS)).groups || []) {
    for (const r of g.rules || []) alertExprs.push({ where: `alert ${r.alert || r.record}`, expr: String(r.expr) });
  }
});

checks.check("every query parses as PromQL (promtool check rules)", () => {
  // One recording rule per query; promtool names a failing rule by its record name.
  const queries = targets.filter(({ target }) => typeof target.expr === "string" && target.expr.trim() !== "");
  const rules = queries.map(({ target }, i) => ({ record: `asgd_dashboard:query_${i}`, expr: target.expr }));
  const tmp = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), "dash-"));
  const file = path.join(tmp, "dashboard_queries.rules.yml");
  fs.writeFileSync(file, yaml.dump({ groups: [{ name: "dashboard", rules }] }));
  const r = run("promtool", ["check", "rules", file]);
  fs.rmSync(tmp, { recursive: true, force: true });
  if (r.status === 0) return [];
  const where = [...new Set([...r.output.matchAll(/asgd_dashboard:query_(\d+)/g)].map((m) => Number(m[1])))].map(
    (i) => `panel "${queries[i].panel.title}" query ${queries[i].target.refId}: ${queries[i].target.expr}`,
  );
  return [`promtool check rules failed:\n${r.output.trim()}`, ...where];
});

// docs/metrics.md tables: | `name` | type | labels | meaning |
const documented = new Map(); // name -> {type, labels: Set}
checks.check("docs/metrics.md lists metrics", () => {
  for (const line of readText(METRICS_DOC).split("\n")) {
    const m = /^\|\s*`(asgd_[a-z0-9_]+)`\s*\|\s*([^|]*)\|\s*([^|]*)\|/.exec(line);
    if (!m) continue;
    const labels = m[3]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => /^[a-z_]+$/.test(s));
    documented.set(m[1], { type: m[2].trim().split(/\s/)[0], labels: new Set(labels) });
  }
  return documented.size > 0 ? [] : [`no metric table rows found in ${METRICS_DOC}`];
});

const SUFFIX = /_(bucket|sum|count)$/;
function metricsIn(expr) {
  return [...new Set(expr.match(/\basgd_[a-z0-9_]+/g) || [])];
}
function baseName(name) {
  if (documented.has(name)) return name;
  const base = name.replace(SUFFIX, "");
  return base;
}
// Label names an expression depends on: by/without clauses and selector matchers.
function labelsIn(expr) {
  const labels = new Set();
  for (const m of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
    for (const l of m[1].split(",")) if (l.trim()) labels.add(l.trim());
  }
  for (const m of expr.matchAll(/\{([^}]*)\}/g)) {
    for (const mm of m[1].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) labels.add(mm[1]);
  }
  return labels;
}

const exprs = targets
  .filter(({ target }) => typeof target.expr === "string")
  .map(({ panel, target }) => ({
    where: `panel "${panel.title}" query ${target.refId}`,
    expr: target.expr,
    legend: target.legendFormat || "",
  }))
  .concat(alertExprs.map((a) => ({ ...a, legend: "" })));

checks.check("every asgd_* metric in the queries and alerts is documented in docs/metrics.md", () => {
  const problems = [];
  for (const { where, expr } of exprs) {
    for (const name of metricsIn(expr)) {
      const base = baseName(name);
      const doc = documented.get(base);
      if (!doc) {
        problems.push(`${where}: ${name} is not in ${METRICS_DOC}`);
      } else if (base !== name && doc.type !== "histogram") {
        problems.push(`${where}: ${name} is a histogram series but ${base} is a ${doc.type}`);
      }
    }
  }
  return problems;
});

checks.check("every label the queries and alerts use exists on their metrics", () => {
  const problems = [];
  for (const { where, expr, legend } of exprs) {
    const names = metricsIn(expr);
    if (names.length === 0) continue; // e.g. up{job=...}: target labels only
    const allowed = new Set(TARGET_LABELS);
    for (const name of names) {
      const doc = documented.get(baseName(name));
      if (doc) for (const l of doc.labels) allowed.add(l);
      if (name.endsWith("_bucket")) allowed.add("le");
    }
    const used = labelsIn(expr);
    for (const m of legend.matchAll(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g)) used.add(m[1]);
    for (const l of used) {
      if (!allowed.has(l)) problems.push(`${where}: label "${l}" is not a label of ${names.join(", ")}`);
    }
  }
  return problems;
});

checks.check("the dashboard has a panel for every topic deploy/README.md describes", () => {
  // A panel per topic, found by the metric its queries use.
  const want = {
    throughput: "asgd_worker_steps_total",
    frames: "asgd_worker_frames_total",
    "staleness quantiles": "asgd_server_push_staleness_bucket",
    "dropped stale": "asgd_server_pushes_dropped_total",
    "step phases": "asgd_worker_step_phase_seconds",
    "RPC latency": "asgd_grpc_server_handling_seconds_bucket",
    "RPC errors": "asgd_grpc_server_handled_total",
    stragglers: "asgd_server_worker_last_push_timestamp_seconds",
    "checkpoint age": "asgd_server_last_checkpoint_timestamp_seconds",
    loss: "asgd_worker_loss",
    accuracy: "asgd_worker_frame_accuracy",
    "connected workers": "asgd_server_connected_workers",
    "model version": "asgd_server_model_version",
  };
  const all = targets.map(({ target }) => target.expr || "").join("\n");
  const problems = Object.entries(want)
    .filter(([, metric]) => !all.includes(metric))
    .map(([topic, metric]) => `no query for ${topic} (${metric})`);
  if (!queryPanels.some((p) => p.type === "heatmap")) problems.push("no heatmap panel (staleness buckets)");
  return problems;
});

checks.finish();
