# A runtime variant of the runner image (sandbox.runtimes): its packages installed from a
# wheelhouse that is the whole build context, with no index (the build needs no network).
# Built by sandbox/build_runtime.sh NAME with DOCKER=1.
ARG BASE_IMAGE=verireward-sandbox:latest
FROM ${BASE_IMAGE}
ARG STAMP=""
COPY . /tmp/wheels
RUN python3 -m venv /tmp/pip-env \
 && /tmp/pip-env/bin/pip install -q --disable-pip-version-check --no-index --find-links /tmp/wheels \
      --target /opt/runtime/site -r /tmp/wheels/requirements.txt \
 && python3 -m compileall -q /opt/runtime/site >/dev/null; rm -rf /tmp/pip-env /tmp/wheels
LABEL verireward.runtime=${STAMP}
ENV VERIREWARD_RUNTIME_SITE=/opt/runtime/site
