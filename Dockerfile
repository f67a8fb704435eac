# syntax=docker/dockerfile:1
# cacheproxy: a fast, indexed, read-only cache in front of the Kubernetes API server.
#   docker build -t cacheproxy .
#   docker run --rm cacheproxy --help
# Stage 1 builds the project and its dependencies into wheels and installs them into a
# virtual environment, compiled to bytecode once (a start that compiles every module takes
# about 2 s instead of 0.7); stage 2 copies only that environment onto a slim Python.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY cacheproxy ./cacheproxy
RUN pip wheel --wheel-dir /wheels . \
    && python -m venv /opt/cacheproxy \
    && /opt/cacheproxy/bin/pip install --no-index --find-links /wheels cacheproxy \
    && /opt/cacheproxy/bin/pip uninstall --yes pip \
    && find /opt/cacheproxy -name '__pycache__' -type d -prune -exec rm -rf {} + \
    && /opt/cacheproxy/bin/python -m compileall -q -j 0 /opt/cacheproxy/lib

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0.dev0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="cacheproxy" \
      org.opencontainers.image.description="A fast, indexed, read-only cache in front of the Kubernetes API server." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.documentation="docs/operations.md"
# The interpreter's pip and setuptools are not needed at run time.
RUN python -m pip uninstall --yes pip setuptools wheel \
    && groupadd --gid 10001 cacheproxy \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin cacheproxy
COPY --from=build /opt/cacheproxy /opt/cacheproxy
ENV PATH=/opt/cacheproxy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["cacheproxy"]
CMD ["serve", "--config", "/etc/cacheproxy/config.yaml"]
