# packbot: one static binary (pure Go, SQLite included) on a distroless base.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/packbot ./cmd/packbot && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/packbot /usr/local/bin/packbot
COPY --from=build --chown=65532:65532 /out/data /var/lib/packbot/data
WORKDIR /var/lib/packbot
ENV PACKBOT_HTTP_ADDR=0.0.0.0:8080 \
    PACKBOT_DATA_DIR=/var/lib/packbot/data \
    PACKBOT_SELF=/usr/local/bin/packbot
EXPOSE 8080
USER nonroot
ENTRYPOINT ["/usr/local/bin/packbot"]
CMD ["serve"]
