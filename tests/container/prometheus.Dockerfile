# Prometheus from Debian's `prometheus` package, standing in for the upstream image
# (prom/prometheus) that deploy/docker-compose.yml names, in compose_check.sh: no image
# registry may be reachable where the check runs, Debian's mirror is. Built on the
# locally made debian:bookworm base (tests/container/lib.sh). Like the upstream image:
# the server is the entrypoint (the compose file passes only flags), it runs as an
# unprivileged user, and /prometheus (the TSDB volume) is writable by that user.
#
#   podman build -f "$PWD/tests/container/prometheus.Dockerfile" -t asgd-check-prometheus tests/container
ARG DEBIAN_IMAGE=debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus \
 && chown prometheus:prometheus /prometheus
USER prometheus
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
