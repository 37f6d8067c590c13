// Offline checks of the Kubernetes manifests in deploy/k8s (no API server needed):
//  * every YAML document parses and validates against the Kubernetes schema of its
//    apiVersion/kind (npm kubernetes-models; it does not flag unknown fields),
//  * kustomization.yaml lists every manifest and its generated ConfigMap's files exist,
//  * the asgd-specific contract: a headless Service + StatefulSet for the servers with
//    native gRPC probes, an Indexed Job for the workers requesting nvidia.com/gpu, pod
//    counts that agree with --num_servers / --num_workers / --servers in the flag files,
//    scrape annotations, and references (ConfigMaps, ServiceAccount) that resolve,
//  * the Prometheus configuration in prometheus-config.yaml passes `promtool check
//    config` once its kubernetes_sd_configs are replaced by static targets (Debian's
//    promtool is built without Kubernetes discovery).
// Run: tests/deploy_node_test.sh tests/deploy_k8s_test.js (Bazel: //tests:deploy_k8s_test).
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { Checks, parseFlagFile, readText, requireValidatorPackage, run } = require("./deploy_testlib.js");

const yaml = requireValidatorPackage("js-yaml");
const K8S_DIR = process.argv[2] || "deploy/k8s";

const checks = new Checks("deploy_k8s_test");

// ---------------------------------------------------------------- load
const kustomization = yaml.load(readText(path.join(K8S_DIR, "kustomization.yaml")));
const manifestFiles = fs
  .readdirSync(K8S_DIR)
  .filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml")
  .sort();

const docs = []; // {file, index, obj}
for (const file of manifestFiles) {
  checks.check(`${file} parses as YAML`, () => {
    let index = 0;
    for (const obj of yaml.loadAll(readText(path.join(K8S_DIR, file)))) {
      if (obj !== null && obj !== undefined) docs.push({ file, index, obj });
      index++;
    }
  });
}

// The ConfigMaps kustomize generates (configMapGenerator), built as kustomize would.
const generated = [];
checks.check("kustomization.yaml: resources and generator files exist, every manifest listed", () => {
  const problems = [];
  const resources = kustomization.resources || [];
  for (const r of resources) {
    if (!fs.existsSync(path.join(K8S_DIR, r))) problems.push(`resource ${r} does not exist`);
  }
  for (const f of manifestFiles) {
    if (!resources.includes(f)) problems.push(`${f} is not listed in resources`);
  }
  for (const gen of kustomization.configMapGenerator || []) {
    const data = {};
    for (const f of gen.files || []) {
      const p = path.join(K8S_DIR, f);
      if (!fs.existsSync(p)) problems.push(`configMapGenerator ${gen.name}: file ${f} does not exist`);
      else data[path.basename(f)] = readText(p);
    }
    generated.push({
      file: "kustomization.yaml",
      index: 0,
      obj: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: gen.name }, data },
    });
  }
  if (!(kustomization.generatorOptions || {}).disableNameSuffixHash) {
    problems.push("generatorOptions.disableNameSuffixHash must be true: the manifests name ConfigMap asgd-config");
  }
  return problems;
});
const all = docs.concat(generated);

// ---------------------------------------------------------------- schema validation
function modelClass(apiVersion, kind) {
  // Core group "v1" lives at kubernetes-models/v1, "apps/v1" at kubernetes-models/apps/v1.
  let mod;
  try {
    mod = requireValidatorPackage(`kubernetes-models/${apiVersion}`);
  } catch (e) {
    throw new Error(`unknown apiVersion ${apiVersion}`);
  }
  if (typeof mod[kind] !== "function") throw new Error(`unknown kind ${kind} in ${apiVersion}`);
  return mod[kind];
}

for (const { file, index, obj } of all) {
  const label = `${file}#${index} ${obj.kind || "?"}/${(obj.metadata || {}).name || "?"}`;
  checks.check(`${label} validates against the Kubernetes schema`, () => {
    if (!obj.apiVersion || !obj.kind) throw new Error("apiVersion and kind are required");
    const Kind = modelClass(obj.apiVersion, obj.kind);
    new Kind(obj).validate();
  });
}

// ---------------------------------------------------------------- asgd contract
function find(kind, name) {
  const d = all.find((x) => x.obj.kind === kind && x.obj.metadata && x.obj.metadata.name === name);
  if (!d) throw new Error(`no ${kind} named ${name}`);
  return d.obj;
}
function container(podSpec, name) {
  const c = (podSpec.containers || []).find((x) => x.name === name);
  if (!c) throw new Error(`no container named ${name}`);
  return c;
}
function flagFile(name) {
  const cm = find("ConfigMap", "asgd-config");
  if (!cm.data || typeof cm.data[name] !== "string") throw new Error(`ConfigMap asgd-config has no ${name}`);
  return parseFlagFile(cm.data[name]);
}
function matches(selector, labels) {
  return Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);
}

checks.check("StatefulSet asgd-server is governed by a headless Service selecting its pods", () => {
  const sts = find("StatefulSet", "asgd-server");
  const svc = find("Service", sts.spec.serviceName);
  const problems = [];
  if (svc.spec.clusterIP !== "None") problems.push(`Service ${svc.metadata.name} is not headless (clusterIP: None)`);
  if (!matches(svc.spec.selector, sts.spec.template.metadata.labels)) {
    problems.push(`Service ${svc.metadata.name}'s selector does not match the server pods' labels`);
  }
  if (!(svc.spec.ports || []).some((p) => p.port === 50051)) problems.push("Service does not expose port 50051");
  return problems;
});

checks.check("asgd-server has native gRPC readiness and liveness probes on 50051", () => {
  const c = container(find("StatefulSet", "asgd-server").spec.template.spec, "server");
  const problems = [];
  for (const probe of ["readinessProbe", "livenessProbe"]) {
    const p = c[probe];
    if (!p || !p.grpc) problems.push(`${probe} is not a grpc probe`);
    else if (p.grpc.port !== 50051) problems.push(`${probe}.grpc.port is ${p.grpc.port}, not 50051`);
  }
  if (!(c.ports || []).some((p) => p.containerPort === 50051)) problems.push("container port 50051 not declared");
  return problems;
});

checks.check("asgd-server: replicas = --num_servers, index from the pod ordinal, requests set", () => {
  const sts = find("StatefulSet", "asgd-server");
  const flags = flagFile("server.flags");
  const c = container(sts.spec.template.spec, "server");
  const cmd = (c.command || []).concat(c.args || []).join(" ");
  const problems = [];
  if (String(sts.spec.replicas) !== flags.num_servers) {
    problems.push(`replicas ${sts.spec.replicas} != --num_servers=${flags.num_servers} in server.flags`);
  }
  if (!cmd.includes("--flagfile=/etc/asgd/server.flags")) problems.push("server does not read --flagfile=/etc/asgd/server.flags");
  if (!/--server_index="?\$\{HOSTNAME##\*-\}"?/.test(cmd)) problems.push("--server_index is not taken from the pod ordinal (${HOSTNAME##*-})");
  if (flags.port !== "50051") problems.push(`server.flags --port=${flags.port}, the probes and --servers use 50051`);
  if (!c.resources || !c.resources.requests || !c.resources.requests.cpu || !c.resources.requests.memory) {
    problems.push("server container has no cpu/memory requests");
  }
  return problems;
});

checks.check("worker --servers lists every server pod by its stable DNS name", () => {
  const sts = find("StatefulSet", "asgd-server");
  const servers = flagFile("worker.flags").servers || "";
  const want = [];
  for (let i = 0; i < sts.spec.replicas; i++) want.push(`${sts.metadata.name}-${i}.${sts.spec.serviceName}:50051`);
  const got = servers.split(",").filter((s) => s !== "").sort();
  return JSON.stringify(got) === JSON.stringify(want.sort())
    ? []
    : [`--servers=${servers} in worker.flags; expected ${want.join(",")}`];
});

checks.check("Job asgd-worker is Indexed with completions = parallelism = --num_workers", () => {
  const job = find("Job", "asgd-worker");
  const flags = flagFile("worker.flags");
  const problems = [];
  if (job.spec.completionMode !== "Indexed") problems.push(`completionMode is ${job.spec.completionMode}, not Indexed`);
  if (job.spec.completions !== job.spec.parallelism) problems.push("completions != parallelism");
  if (String(job.spec.completions) !== flags.num_workers) {
    problems.push(`completions ${job.spec.completions} != --num_workers=${flags.num_workers} in worker.flags`);
  }
  const c = container(job.spec.template.spec, "worker");
  const cmd = (c.command || []).concat(c.args || []).join(" ");
  if (!cmd.includes("--flagfile=/etc/asgd/worker.flags")) problems.push("worker does not read --flagfile=/etc/asgd/worker.flags");
  if (!/--worker_index="?\$\{?JOB_COMPLETION_INDEX\}?"?/.test(cmd)) problems.push("--worker_index is not $JOB_COMPLETION_INDEX");
  return problems;
});

checks.check("asgd-worker requests an NVIDIA GPU and runs --backend=auto", () => {
  const c = container(find("Job", "asgd-worker").spec.template.spec, "worker");
  const limits = (c.resources || {}).limits || {};
  const problems = [];
  if (!(Number(limits["nvidia.com/gpu"]) >= 1)) problems.push("resources.limits has no nvidia.com/gpu >= 1");
  if (flagFile("worker.flags").backend !== "auto") problems.push("worker.flags does not set --backend=auto");
  return problems;
});

checks.check("asgd-worker has a corpus: init container generating it into the mounted volume", () => {
  const spec = find("Job", "asgd-worker").spec.template.spec;
  const corpusDir = flagFile("worker.flags").corpus;
  const mounted = (c) => (c.volumeMounts || []).find((m) => m.mountPath === corpusDir);
  const worker = container(spec, "worker");
  const problems = [];
  const wm = mounted(worker);
  if (!wm) return [`worker does not mount a volume at --corpus=${corpusDir}`];
  const init = (spec.initContainers || []).find((c) => {
    const m = mounted(c);
    return m && m.name === wm.name && (c.command || []).concat(c.args || []).join(" ").includes("make_corpus");
  });
  const vol = (spec.volumes || []).find((v) => v.name === wm.name);
  if (!init && !(vol && vol.persistentVolumeClaim)) {
    problems.push(`nothing fills ${corpusDir}: no make_corpus init container on volume ${wm.name}, and it is no PVC`);
  }
  return problems;
});

checks.check("server and worker pods carry prometheus.io scrape annotations matching --metrics_port", () => {
  const problems = [];
  for (const [kind, name, cname, flagsName] of [
    ["StatefulSet", "asgd-server", "server", "server.flags"],
    ["Job", "asgd-worker", "worker", "worker.flags"],
  ]) {
    const tpl = find(kind, name).spec.template;
    const ann = tpl.metadata.annotations || {};
    const port = flagFile(flagsName).metrics_port;
    if (ann["prometheus.io/scrape"] !== "true") problems.push(`${name}: prometheus.io/scrape is not "true"`);
    if (ann["prometheus.io/port"] !== port) problems.push(`${name}: prometheus.io/port ${ann["prometheus.io/port"]} != --metrics_port=${port}`);
    const c = container(tpl.spec, cname);
    if (!(c.ports || []).some((p) => p.name === "metrics" && String(p.containerPort) === port)) {
      problems.push(`${name}: no container port named "metrics" on ${port} (the Prometheus config keeps that port)`);
    }
  }
  return problems;
});

checks.check("every ConfigMap, ServiceAccount and Role referenced exists", () => {
  const problems = [];
  for (const { obj } of all) {
    const tpl = obj.spec && obj.spec.template;
    if (tpl && tpl.spec) {
      for (const v of tpl.spec.volumes || []) {
        if (v.configMap && !all.some((d) => d.obj.kind === "ConfigMap" && d.obj.metadata.name === v.configMap.name)) {
          problems.push(`${obj.kind}/${obj.metadata.name}: ConfigMap ${v.configMap.name} is not defined`);
        }
      }
      const sa = tpl.spec.serviceAccountName;
      if (sa && !all.some((d) => d.obj.kind === "ServiceAccount" && d.obj.metadata.name === sa)) {
        problems.push(`${obj.kind}/${obj.metadata.name}: ServiceAccount ${sa} is not defined`);
      }
    }
    if (obj.kind === "RoleBinding") {
      if (!all.some((d) => d.obj.kind === obj.roleRef.kind && d.obj.metadata.name === obj.roleRef.name)) {
        problems.push(`RoleBinding/${obj.metadata.name}: ${obj.roleRef.kind} ${obj.roleRef.name} is not defined`);
      }
      for (const s of obj.subjects || []) {
        if (s.kind === "ServiceAccount" && !all.some((d) => d.obj.kind === "ServiceAccount" && d.obj.metadata.name === s.name)) {
          problems.push(`RoleBinding/${obj.metadata.name}: ServiceAccount ${s.name} is not defined`);
        }
      }
    }
  }
  return problems;
});

// ---------------------------------------------------------------- Prometheus on Kubernetes
checks.check("prometheus-config.yaml: pod discovery keeping annotated pods; valid for promtool", () => {
  const cm = find("ConfigMap", "asgd-prometheus-config");
  const text = (cm.data || {})["prometheus.yml"];
  if (typeof text !== "string") throw new Error("ConfigMap asgd-prometheus-config has no prometheus.yml");
  const config = yaml.load(text);
  const problems = [];
  const jobs = config.scrape_configs || [];
  const sd = jobs.filter((j) => (j.kubernetes_sd_configs || []).some((s) => s.role === "pod"));
  if (sd.length === 0) problems.push("no scrape job uses kubernetes_sd_configs with role: pod");
  for (const j of sd) {
    const keep = (j.relabel_configs || []).some(
      (r) =>
        r.action === "keep" &&
        (r.source_labels || []).includes("__meta_kubernetes_pod_annotation_prometheus_io_scrape") &&
        String(r.regex) === "true",
    );
    if (!keep) problems.push(`job ${j.job_name}: no relabel rule keeping prometheus.io/scrape="true" pods`);
  }
  // Debian's promtool lacks kubernetes_sd_configs: check everything else with static targets.
  for (const j of jobs) {
    if (j.kubernetes_sd_configs) {
      delete j.kubernetes_sd_configs;
      j.static_configs = [{ targets: ["localhost:9100"] }];
    }
  }
  const tmp = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), "k8s-prom-"));
  const file = path.join(tmp, "prometheus.yml");
  fs.writeFileSync(file, yaml.dump(config));
  const r = run("promtool", ["check", "config", file]);
  fs.rmSync(tmp, { recursive: true, force: true });
  if (r.status !== 0) problems.push(`promtool check config (discovery replaced by static targets):\n${r.output.trim()}`);
  const deployment = find("Deployment", "asgd-prometheus");
  const mountsConfig = (deployment.spec.template.spec.volumes || []).some(
    (v) => v.configMap && v.configMap.name === cm.metadata.name,
  );
  if (!mountsConfig) problems.push("Deployment asgd-prometheus does not mount ConfigMap asgd-prometheus-config");
  return problems;
});

checks.finish();
