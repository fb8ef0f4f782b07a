module github.com/strandlog/strand/bench/peer/nats

go 1.26.0

require (
	github.com/nats-io/nats.go v1.55.0
	github.com/strandlog/strand v0.0.0
)

require (
	connectrpc.com/connect v1.19.1 // indirect
	github.com/klauspost/compress v1.20.5 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/strandlog/strand => ../../..
