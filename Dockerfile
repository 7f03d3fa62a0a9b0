# gpuslice plugin image: the device plugin and the label writer (deploy/ runs both from it), without the
# simulator's extra (numpy is the one numerical package it keeps). The entrypoint is `gpuslice`:
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-trixie@sha256:<digest> -t REGISTRY/gpuslice:0.1.0 .
#   docker run --rm REGISTRY/gpuslice:0.1.0 plugin --backend fake --node-spec preset:h100x4 --kubelet-socket ""
# The base is pinned to a Debian release (trixie) and by digest. The digest below is a placeholder that no
# registry serves, so a build fails until you pass the digest you have checked (see docs/install.md):
#   docker buildx imagetools inspect python:3.11-slim-trixie
ARG BASE_IMAGE=python:3.11-slim-trixie@sha256:0000000000000000000000000000000000000000000000000000000000000000

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
WORKDIR /src
COPY requirements/runtime.lock requirements/build.lock requirements/
COPY pyproject.toml README.md ./
COPY src ./src
# The build backend comes from build.lock (hashed) into a venv of its own; the wheel is built without
# isolation, so no unlocked setuptools is fetched. The runtime venv has no pip and no setuptools: the build
# venv's pip installs into it (--python) the hashed runtime.lock, then the wheel alone.
RUN python -m venv /opt/build \
    && /opt/build/bin/pip install --require-hashes --no-deps -r requirements/build.lock \
    && /opt/build/bin/pip wheel --no-build-isolation --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/gpuslice \
    && /opt/build/bin/pip --python /opt/gpuslice/bin/python install --require-hashes --no-deps \
       -r requirements/runtime.lock \
    && /opt/build/bin/pip --python /opt/gpuslice/bin/python install --no-deps --no-index /wheels/gpuslice-*.whl \
    && /opt/gpuslice/bin/python -m compileall -q /opt/gpuslice \
    && /opt/gpuslice/bin/gpuslice --version

FROM ${BASE_IMAGE}
# The base's own pip and setuptools (ensurepip) are not in /opt/gpuslice; nothing on PATH before it is used.
COPY --from=build /opt/gpuslice /opt/gpuslice
# Bytecode was compiled at build time; the root filesystem is read-only in the pods.
ENV PATH=/opt/gpuslice/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# The default user is unprivileged (the label writer runs as it). The device plugin's DaemonSet runs as uid 0
# with every capability dropped, because the kubelet's device-plugins directory is root:root 0750.
RUN groupadd --system --gid 65532 gpuslice \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin gpuslice
USER 65532:65532
ENTRYPOINT ["gpuslice"]
CMD ["plugin", "--backend", "auto"]
