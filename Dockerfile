# The operator image: `ocp-gpu run` (the Deployment's command) plus the templates it renders.
# NB: not built in this project's CI (no container engine there); the Python package it
# installs is what the tests exercise.
FROM registry.access.redhat.com/ubi9/python-311:latest AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ocp_gpu ./ocp_gpu
RUN pip install --no-cache-dir build && python -m build --wheel --outdir /wheels

FROM registry.access.redhat.com/ubi9/python-311:latest
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 1001
ENTRYPOINT ["ocp-gpu"]
CMD ["run"]
