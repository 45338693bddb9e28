# syntax=docker/dockerfile:1
#
# gmgate in a container: a multi-stage build, a non-root user, and the
# configuration and state directories as volumes.
#
#   docker build -t gmgate .
#   docker run --rm -p 8443:8443 -p 127.0.0.1:9180:9180 gmgate \
#       serve --demo --listen 0.0.0.0:8443 --admin 0.0.0.0:9180
#   docker run -d -v /etc/gmgate:/etc/gmgate:ro -v gmgate-state:/var/lib/gmgate \
#       -p 443:8443 -p 127.0.0.1:9180:9180 gmgate
#
# The binary is built with cgo and runs on glibc by default: the SDF
# crypto-card backend loads the vendor's libsdf.so with dlopen, which a
# static binary cannot do, and vendors ship glibc builds. Mount the
# vendor library and pass the card's device node (--device) to use it.
# Without crypto cards, a fully static binary works as well:
#
#   docker build --build-arg CGO_ENABLED=0 -t gmgate:static .

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
ARG CGO_ENABLED=1
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=${CGO_ENABLED} go build -trimpath -ldflags="-s -w" -o /out/gmgate ./cmd/gmgate \
 && /out/gmgate version

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gmgate \
 && useradd --system --uid 10001 --gid gmgate --home-dir /var/lib/gmgate --shell /usr/sbin/nologin gmgate \
 && mkdir -p /etc/gmgate /var/lib/gmgate \
 && chown gmgate:gmgate /var/lib/gmgate
COPY --from=build /out/gmgate /usr/local/bin/gmgate
COPY deploy/gmgate.yaml /etc/gmgate/gmgate.yaml.example
# The demo keeps its state under $XDG_CONFIG_HOME/gmgate/demo.
ENV XDG_CONFIG_HOME=/var/lib/gmgate
USER gmgate:gmgate
WORKDIR /var/lib/gmgate
VOLUME ["/etc/gmgate", "/var/lib/gmgate"]
EXPOSE 8443 9180
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gmgate"]
CMD ["serve", "-c", "/etc/gmgate/gmgate.yaml"]
