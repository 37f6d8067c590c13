#!/usr/bin/env python3
"""The security flags on the real binary: asgd_server with TLS, mutual TLS and
a bearer token (every port chosen by the OS), probed by
`asgd_server --health_probe` as a container would; and start-up errors that
name the unreadable file. Certificates come from security_make_certs.sh
(the openssl command). Usage: security_binary_test.py SERVER MAKE_CERTS
"""
import os
import subprocess
import sys
import tempfile
import time

import testlib
from testlib import LOGS, read_port

DEADLINE_S = 60
CHECKS = testlib.Checks()
check, fail, report_and_exit = CHECKS.check, CHECKS.fail, CHECKS.report_and_exit


def wait_for(what, predicate, proc):
    return testlib.wait_for(what, predicate, timeout=DEADLINE_S,
                            interval=0.05, proc=proc)


def run(args):
    return testlib.run(args, DEADLINE_S)


def main():
    server, make_certs = sys.argv[1:3]
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    certs = os.path.join(tmp, "certs")
    subprocess.run([make_certs, certs], check=True)
    pem = lambda name: os.path.join(certs, name)
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write("test-token-4f1c9a\n")
    model = ["--feature_dim=8", "--context=0", "--hidden=8", "--num_classes=3",
             "--num_shards=1",
             "--log_every_s=0"]
    procs = []

    def start(name, flags):
        pf = os.path.join(tmp, f"port.{name}")
        log = os.path.join(tmp, f"{name}.log")
        LOGS.append(log)
        p = subprocess.Popen([server, "--host=127.0.0.1", "--port=0",
                              f"--port_file={pf}"] + model + flags,
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        return wait_for(f"{name} server", lambda: read_port(pf), p)

    def probe(port, flags):
        return run([server, f"--health_probe=127.0.0.1:{port}"] + flags)

    try:
        # Mutual TLS and a token, as a production deployment, from a flag
        # file as in deploy/ (docs/security.md).
        flagfile = os.path.join(tmp, "server.flags")
        with open(flagfile, "w") as f:
            f.write("\n".join([f"--tls_cert={pem('server.pem')}",
                                f"--tls_key={pem('server.key')}",
                                f"--tls_ca={pem('ca.pem')}",
                                "--require_client_cert",
                                f"--auth_token_file={token_file}"]) + "\n")
        mtls = start("mtls", [f"--flagfile={flagfile}"])
        r = probe(mtls, [f"--flagfile={flagfile}"])
        check("probe with the server's own flag file", r.returncode == 0
              and "SERVING" in r.stdout, r.stdout + r.stderr)
        # The probe presents the server's own certificate and needs no token.
        client_flags = [f"--tls_ca={pem('ca.pem')}",
                        f"--tls_cert={pem('server.pem')}",
                        f"--tls_key={pem('server.key')}"]
        r = probe(mtls, client_flags + ["--tls_server_name=localhost"])
        check("probe over mutual TLS without the token", r.returncode == 0
              and "SERVING" in r.stdout, r.stdout + r.stderr)
        r = probe(mtls, client_flags + [f"--auth_token_file={token_file}"])
        check("probe over mutual TLS with the token", r.returncode == 0,
              r.stdout + r.stderr)
        r = probe(mtls, [f"--tls_ca={pem('ca.pem')}"])
        check("probe without a client certificate works (health is exempt)",
              r.returncode == 0 and "SERVING" in r.stdout, r.stdout + r.stderr)
        r = probe(mtls, [])
        check("plaintext probe of a TLS server fails", r.returncode == 1,
              r.stdout + r.stderr)
        r = probe(mtls, [f"--tls_ca={pem('other_ca.pem')}"])
        check("probe trusting another CA fails", r.returncode == 1,
              r.stdout + r.stderr)
        missing = os.path.join(tmp, "missing-ca.pem")
        r = probe(mtls, [f"--tls_ca={missing}"])
        check("probe with an unreadable --tls_ca names it",
              r.returncode == 1 and missing in r.stderr, r.stderr)

        # Token only (trusted network): the probe needs no flags.
        plain = start("token", [f"--auth_token_file={token_file}"])
        r = probe(plain, [])
        check("probe of a token-only server", r.returncode == 0,
              r.stdout + r.stderr)

        # Start-up errors name the file.
        for name, flags, path in [
                ("missing certificate",
                 [f"--tls_cert={missing}", f"--tls_key={pem('server.key')}"],
                 missing),
                ("missing token file",
                 [f"--auth_token_file={missing}"], missing)]:
            r = run([server, "--host=127.0.0.1", "--port=0"] + model + flags)
            check(f"server refuses to start: {name}",
                  r.returncode != 0 and path in r.stderr, r.stderr)
        r = run([server, "--host=127.0.0.1", "--port=0"] + model +
                [f"--tls_cert={pem('server.pem')}", f"--tls_key={pem('server.key')}",
                 "--require_client_cert"])
        check("server refuses --require_client_cert without --tls_ca",
              r.returncode != 0 and "--tls_ca" in r.stderr, r.stderr)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    report_and_exit()


if __name__ == "__main__":
    main()
