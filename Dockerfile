# gpuslice image: the device plugin and the label writer (deploy/ runs both from it).
#   docker build -t REGISTRY/gpuslice:0.1.0 .
# Dependencies are pinned by requirements.lock (used as a constraints file, so only the runtime
# dependencies of the package are installed, at the locked versions).

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements.lock pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/gpuslice \
    && /opt/gpuslice/bin/pip install --constraint requirements.lock . \
    && /opt/gpuslice/bin/gpuslice --version

FROM python:3.11-slim
COPY --from=build /opt/gpuslice /opt/gpuslice
# Bytecode was compiled at install time; the root filesystem is read-only in the pods.
ENV PATH=/opt/gpuslice/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# The default user is unprivileged (the label writer runs as it). The device plugin's DaemonSet runs as uid 0
# with every capability dropped, because the kubelet's device-plugins directory is root:root 0750.
RUN groupadd --system --gid 65532 gpuslice \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin gpuslice
USER 65532:65532
ENTRYPOINT ["gpuslice"]
CMD ["plugin", "--backend", "auto"]
