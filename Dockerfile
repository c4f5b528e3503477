# packbot: one static binary (pure Go, SQLite included) on a distroless base: non-root, no
# shell, runs with a read-only root filesystem (only /var/lib/packbot/data is written).
#
#   docker build -t packbot .
#   docker run --read-only --tmpfs /tmp -v packbot-data:/var/lib/packbot/data -p 127.0.0.1:8080:8080 packbot
#
# The bases are build arguments so that an offline build can use local images (deploy/test
# builds them from Debian packages): GO_IMAGE needs Go 1.26 on its PATH, RUNTIME_IMAGE only CA
# certificates and time zones (a static base).
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -ldflags="-s -w" -o /out/packbot ./cmd/packbot && mkdir -p /out/data

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/packbot /usr/local/bin/packbot
COPY --from=build --chown=65532:65532 /out/data /var/lib/packbot/data
# The working folder is the volume too, so that `docker run IMAGE wallet …` keeps its state there.
WORKDIR /var/lib/packbot/data
# 0.0.0.0: reachable through the container's published port. The data folder holds the SQLite
# store (when no PostgreSQL is configured), the DIDComm key file and the wallet's state.
ENV PACKBOT_HTTP_ADDR=0.0.0.0:8080 \
    PACKBOT_DATA_DIR=/var/lib/packbot/data \
    PACKBOT_SELF=/usr/local/bin/packbot
VOLUME /var/lib/packbot/data
EXPOSE 8080
# 65532 is distroless's "nonroot"; numeric, so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
# serve stops on SIGTERM: it stops taking events, finishes the ones in hand and closes the store
# (well within Docker's 10 s and Kubernetes' 30 s grace periods).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/packbot"]
CMD ["serve"]
