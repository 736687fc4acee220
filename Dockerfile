# sds-proxy: a static binary on a distroless, non-root base.
# Build: docker build --build-arg VERSION=$(git describe --always) -t sds-proxy .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sds-proxy ./cmd/sds-proxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sds-proxy /sds-proxy
# The config is mounted as a directory (a ConfigMap without subPath) so hot
# reload sees updates; see deploy/kubernetes.yaml.
COPY sds.yaml /etc/sds/sds.yaml
# certmagic keeps ACME state under $HOME; point it at a writable volume.
ENV HOME=/tmp
USER nonroot:nonroot
EXPOSE 8080 9901
ENTRYPOINT ["/sds-proxy"]
CMD ["run", "-config", "/etc/sds/sds.yaml"]
