# Fallback image for the star, used by the CDK app (with a warning) only while
# functions/star/Dockerfile does not exist. Build context: the repository root.
# The star's own Dockerfile replaces this; keep the contract the same:
# ENTRYPOINT is the star binary, flags are appended by the task definition.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux TARGETARCH=arm64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/star ./functions/star

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/star /star
EXPOSE 4780 9090
ENTRYPOINT ["/star"]
