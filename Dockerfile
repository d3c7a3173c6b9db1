# tritonguard daemon image: `docker build -t tritonguard:0.1.0 .`
#
# The base is pinned by digest, so a rebuild gets the same Python and Debian until the digest
# is changed on purpose. This is python:3.11-slim (Python 3.11.15, Debian trixie) for
# linux/amd64, as published on 2026-08-05; for a multi-arch build pass the tag's index digest
# instead (docs/deploy.md, "The image", says how to look both up and when to update them):
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<index digest> .
ARG PYTHON_IMAGE=python:3.11-slim@sha256:78b39ef14d8e2b4d71f8dc304f1328c37df95fe0ef99477c2ae6bd3d03784553

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/tritonguard
# Every dependency at the version requirements.lock pins, each file checked against its
# hash: a changed upload, or a package the lock does not name, fails the build. The lock
# also pins setuptools, which builds the package below.
COPY requirements.lock ./
RUN /opt/tritonguard/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY daemon ./daemon
COPY playbooks ./playbooks
# The package and its shipped playbooks, built with the locked setuptools (no isolated build
# environment, which would fetch an unpinned one) and installed without dependencies: they
# all came from the lock, and `pip check` proves they satisfy the package. The image has no
# `lab` or `dev` extra: it runs the daemon and the playbook CLI (validate, test, replay);
# `tritonguard demo` in it says what to install and exits 2.
RUN /opt/tritonguard/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/tritonguard/bin/pip install --no-deps --no-index /wheels/*.whl \
 && /opt/tritonguard/bin/pip check

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/tritonguard/bin:$PATH
COPY --from=build /opt/tritonguard /opt/tritonguard
RUN groupadd --system --gid 10001 tritonguard \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/tritonguard --no-create-home tritonguard \
 && mkdir -p /var/lib/tritonguard \
 && chown tritonguard:tritonguard /var/lib/tritonguard
USER 10001:10001
WORKDIR /var/lib/tritonguard
# The audit database and the saved baselines beside it (<stem>-baselines.jsonl.gz). The
# shipped deploy mounts an emptyDir here: it survives container restarts, not a new pod
# (docs/deploy.md, "State across restarts").
ENV TRITONGUARD_AUDIT_DB_PATH=/var/lib/tritonguard/audit.sqlite3
# matplotlib (the incident charts; its wheels bundle what they need, no system packages) keeps
# its font cache here: the root filesystem is read-only in deploy/, /tmp is a writable volume.
ENV MPLCONFIGDIR=/tmp/matplotlib
EXPOSE 9108
# For `docker run` and Compose: /healthz answers while the daemon's event loop runs. The slim
# base has no curl, so Python's urllib asks (a non-2xx status or no answer raises, exit 1).
# Kubernetes ignores HEALTHCHECK: deploy/base/deployment.yaml has its own liveness (/healthz)
# and readiness (/readyz) probes. It assumes the default listen port, 9108.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9108/healthz', timeout=4)"]
ENTRYPOINT ["tritonguard"]
CMD ["run"]
