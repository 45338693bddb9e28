# syntax=docker/dockerfile:1
#
# gmgate in a container: a multi-stage build, a non-root user, and the
# configuration and state directories as volumes.
#
#   docker build --build-arg VERSION=v1.2.3 -t gmgate .
#   docker run --rm -p 8443:8443 -p 127.0.0.1:9180:9180 gmgate \
#       serve --demo --listen 0.0.0.0:8443 --admin 0.0.0.0:9180
#   docker run -d -v /etc/gmgate:/etc/gmgate:ro -v gmgate-state:/var/lib/gmgate \
#       -p 443:8443 -p 127.0.0.1:9180:9180 gmgate
#
# Both platforms from one machine, each compiled natively by Go for its
# target (no emulation: every RUN below runs on the build machine's own
# platform, so no binfmt/QEMU set-up is needed):
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#       --build-arg VERSION=v1.2.3 -t registry.example/gmgate:v1.2.3 --push .
#
# VERSION is what `gmgate version` prints (default "dev").
#
# /etc/gmgate/gmgate.yaml.example (deploy/docker/gmgate.yaml) is shaped
# for the container: the gateway on 8443 (uid 10001 binds no port below
# 1024; publish it as 443), the admin listener on 0.0.0.0:9180 (publish
# it on the host's loopback only), the access log on stdout. The
# HEALTHCHECK runs `gmgate health`, which asks the admin listener's
# /readyz on 127.0.0.1:9180 and needs no curl in the image: keep
# admin.listen on port 9180 (on 0.0.0.0 or 127.0.0.1), or override the
# check (docker run --health-cmd "gmgate health --admin 127.0.0.1:PORT",
# or --no-healthcheck when admin.listen is off).
#
# The binary is built with cgo and runs on glibc by default: the SDF
# crypto-card backend loads the vendor's libsdf.so with dlopen, which a
# static binary cannot do, and vendors ship glibc builds. Mount the
# vendor library (built for the image's architecture) and pass the card's
# device node (--device) to use it. Without crypto cards, a fully static
# binary works as well:
#
#   docker build --build-arg CGO_ENABLED=0 -t gmgate:static .

ARG GO_VERSION=1.26

# The build stage runs on the build machine's platform and cross-compiles
# for the target's: Go itself, and for cgo a C cross-compiler from Debian.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS
ARG TARGETARCH
ARG CGO_ENABLED=1
ARG VERSION=dev
RUN set -eu; \
    if [ "$CGO_ENABLED" = 1 ] && [ "$TARGETARCH" != "$(go env GOHOSTARCH)" ]; then \
      case "$TARGETARCH" in \
        amd64) triple=x86-64-linux-gnu ;; \
        arm64) triple=aarch64-linux-gnu ;; \
        *) echo "no C cross-compiler for $TARGETARCH here; build with --build-arg CGO_ENABLED=0" >&2; exit 1 ;; \
      esac; \
      apt-get update; \
      apt-get install -y --no-install-recommends "gcc-$triple" "libc6-dev-$TARGETARCH-cross"; \
      rm -rf /var/lib/apt/lists/*; \
      echo "export CC=$(echo "$triple" | sed 's/^x86-64/x86_64/')-gcc" > /cc.env; \
    else \
      : > /cc.env; \
    fi
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The amd64 build targets baseline x86-64 (GOAMD64=v1) and the arm64 one
# ARMv8.0 (GOARM64=v8.0), as the release binaries do.
RUN set -eu; \
    . /cc.env; \
    CGO_ENABLED=$CGO_ENABLED GOOS=$TARGETOS GOARCH=$TARGETARCH GOAMD64=v1 GOARM64=v8.0 \
      go build -trimpath -ldflags="-s -w -X github.com/gmgate/gmgate/internal/version.Version=$VERSION" \
      -o /out/gmgate ./cmd/gmgate; \
    if [ "$TARGETOS/$TARGETARCH" = "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" ]; then /out/gmgate version; fi

# The user, the directories and the CA bundle, made on the build
# machine's platform too and copied into the image below (the files are
# the same on every architecture of Debian 12).
FROM --platform=$BUILDPLATFORM debian:bookworm-slim AS rootfs
RUN set -eu; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 gmgate; \
    useradd --system --uid 10001 --gid gmgate --home-dir /var/lib/gmgate --shell /usr/sbin/nologin gmgate; \
    mkdir -p /rootfs/etc/ssl/certs /rootfs/etc/gmgate /rootfs/var/lib/gmgate; \
    cp /etc/passwd /etc/group /rootfs/etc/; \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/

FROM debian:bookworm-slim
COPY --from=rootfs --chown=0:0 /rootfs/etc/ /etc/
COPY --from=rootfs --chown=10001:10001 /rootfs/var/lib/gmgate /var/lib/gmgate
COPY --from=build /out/gmgate /usr/local/bin/gmgate
COPY deploy/docker/gmgate.yaml /etc/gmgate/gmgate.yaml.example
# The demo keeps its state under $XDG_CONFIG_HOME/gmgate/demo.
ENV XDG_CONFIG_HOME=/var/lib/gmgate
USER gmgate:gmgate
WORKDIR /var/lib/gmgate
VOLUME ["/etc/gmgate", "/var/lib/gmgate"]
EXPOSE 8443 9180
# Unhealthy once /readyz stops answering 200: the process is gone, hangs,
# or drains for shutdown. gmgate health gives up before Docker's timeout.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/gmgate", "health", "--timeout", "4s"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gmgate"]
CMD ["serve", "-c", "/etc/gmgate/gmgate.yaml"]
