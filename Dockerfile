# tritonguard daemon image: `docker build -t tritonguard:0.1.0 .`
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY daemon ./daemon
COPY playbooks ./playbooks
# Build a wheel of the package and its shipped playbooks. The image installs it without the
# `lab` and `dev` extras: it runs the daemon and the playbook CLI (validate, test, replay).
# The fault lab's code is in the wheel but not its dependencies (a tritonserver build,
# tritonclient), so `tritonguard demo` in this image says what to install and exits 2.
RUN pip install --no-cache-dir --upgrade pip build \
 && python -m build --wheel --outdir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels \
 && groupadd --system --gid 10001 tritonguard \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/tritonguard --no-create-home tritonguard \
 && mkdir -p /var/lib/tritonguard \
 && chown tritonguard:tritonguard /var/lib/tritonguard
USER 10001:10001
WORKDIR /var/lib/tritonguard
ENV TRITONGUARD_AUDIT_DB_PATH=/var/lib/tritonguard/audit.sqlite3
# matplotlib (the incident charts; its wheels bundle what they need, no system packages) keeps
# its font cache here: the root filesystem is read-only in deploy/, /tmp is a writable volume.
ENV MPLCONFIGDIR=/tmp/matplotlib
EXPOSE 9108
ENTRYPOINT ["tritonguard"]
CMD ["run"]
