// Shared helpers of the Node.js deployment checks (tests/deploy_*_test.js), run by
// tests/deploy_node_test.sh from the Bazel runfiles root, so paths such as
// "deploy/k8s/server.yaml" are relative to the working directory.
//
// Each check is a named case; the results go to stdout (one "ok"/"FAIL" line per case)
// and, under Bazel, to $XML_OUTPUT_FILE as JUnit XML, one <testcase> per check, so
// scripts/test.sh counts them. The process exits 1 if any check failed.
"use strict";

const childProcess = require("child_process");
const fs = require("fs");
const { createRequire } = require("module");
const path = require("path");

// require() for the npm packages installed in deploy/k8s/validate/node_modules.
// tests/deploy_node_test.sh sets ASGD_VALIDATE_DIR to that directory.
function requireValidatorPackage(name) {
  const dir = process.env.ASGD_VALIDATE_DIR;
  if (!dir) throw new Error("ASGD_VALIDATE_DIR is not set; run this through tests/deploy_node_test.sh");
  return createRequire(path.join(dir, "package.json"))(name);
}

function readText(file) {
  return fs.readFileSync(file, "utf8");
}

// Runs a command; returns {status, output}. Throws with a clear message when the
// command is not installed.
function run(cmd, args) {
  const r = childProcess.spawnSync(cmd, args, { encoding: "utf8" });
  if (r.error && r.error.code === "ENOENT") {
    throw new Error(`'${cmd}' not found: install it (Debian package list in deploy/README.md)`);
  }
  if (r.error) throw r.error;
  return { status: r.status, output: (r.stdout || "") + (r.stderr || "") };
}

// Parses an absl flag file: {name: value} for every "--name=value" line (comments and
// blank lines skipped). A bare "--name" is recorded as "true".
function parseFlagFile(text) {
  const flags = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^--([A-Za-z0-9_]+)(?:=(.*))?$/.exec(line);
    if (!m) throw new Error(`not a --flag=value line: ${JSON.stringify(line)}`);
    flags[m[1]] = m[2] === undefined ? "true" : m[2];
  }
  return flags;
}

class Checks {
  constructor(suite) {
    this.suite = suite;
    this.results = [];
  }

  // Runs fn; a thrown error fails the check with its message. fn may return a list of
  // problems (strings): a non-empty list fails the check too.
  check(name, fn) {
    let problems;
    try {
      const r = fn();
      problems = Array.isArray(r) ? r : [];
    } catch (e) {
      problems = [e && e.message ? e.message : String(e)];
    }
    this.results.push({ name, problems });
    if (problems.length === 0) {
      console.log(`ok   ${name}`);
    } else {
      console.log(`FAIL ${name}`);
      for (const p of problems) console.log(`       ${p.split("\n").join("\n       ")}`);
    }
  }

  // Writes the JUnit XML, prints the totals and exits.
  finish() {
    const failed = this.results.filter((r) => r.problems.length > 0).length;
    const xmlFile = process.env.XML_OUTPUT_FILE;
    if (xmlFile) {
      const esc = (s) =>
        s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
      const cases = this.results.map((r) => {
        const open = `  <testcase classname="${esc(this.suite)}" name="${esc(r.name)}">`;
        if (r.problems.length === 0) return `${open}</testcase>`;
        const msg = esc(r.problems.join("\n"));
        return `${open}\n    <failure message="${esc(r.problems[0])}">${msg}</failure>\n  </testcase>`;
      });
      fs.writeFileSync(
        xmlFile,
        `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n<testsuite name="${esc(this.suite)}" ` +
          `tests="${this.results.length}" failures="${failed}">\n${cases.join("\n")}\n</testsuite>\n</testsuites>\n`,
      );
    }
    // Not the "N passed, N failed" form: that line is reserved for scripts/test.sh.
    console.log(`${this.suite}: ${this.results.length} checks, ${failed} failing`);
    process.exit(failed === 0 ? 0 : 1);
  }
}

module.exports = { Checks, parseFlagFile, readText, requireValidatorPackage, run };
