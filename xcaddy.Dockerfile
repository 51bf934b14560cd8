# Builds Caddy with caddy-ha's modules using xcaddy.
#   docker build -f xcaddy.Dockerfile -t caddy-ha .
FROM golang:1.26 AS build
RUN go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5
WORKDIR /src
COPY . .
# @v0.0.0 pins the local checkout without asking the module proxy for it.
RUN xcaddy build v2.11.9 --with github.com/caddy-ha/caddy-ha@v0.0.0=/src --output /usr/bin/caddy

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/bin/caddy /usr/bin/caddy
COPY Caddyfile.example /etc/caddy/Caddyfile.example
ENTRYPOINT ["/usr/bin/caddy"]
CMD ["run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
