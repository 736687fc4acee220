# sds-proxy: a static binary on a distroless, non-root base.
# Build: docker build --build-arg VERSION=$(git describe --always) \
#          --build-arg REVISION=$(git rev-parse HEAD) -t sds-proxy .
# deploy/check/dockerfile_test.go holds this file to the manifests.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sds-proxy ./cmd/sds-proxy

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="sds-proxy" \
      org.opencontainers.image.description="A sidecar reverse proxy that degrades a service before it falls over" \
      org.opencontainers.image.source="https://github.com/sds-proxy/sds-proxy" \
      org.opencontainers.image.url="https://github.com/sds-proxy/sds-proxy" \
      org.opencontainers.image.documentation="https://github.com/sds-proxy/sds-proxy#documentation" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
COPY --from=build /out/sds-proxy /sds-proxy
# The config is mounted as a directory (a ConfigMap without subPath) so hot
# reload sees updates; see deploy/base.
COPY sds.yaml /etc/sds/sds.yaml
# certmagic keeps ACME state under $HOME; point it at a writable volume.
ENV HOME=/tmp
# Numeric, so that runAsNonRoot can check it (with a name the kubelet
# refuses to start the container). 65532 is distroless's nonroot.
USER 65532:65532
EXPOSE 8080 9901
ENTRYPOINT ["/sds-proxy"]
CMD ["run", "-config", "/etc/sds/sds.yaml"]
