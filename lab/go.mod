module github.com/idemkit/idem/lab

go 1.26.0

// The lab measures and checks the library beside it; it is never released.
replace (
	github.com/idemkit/idem => ../
	github.com/idemkit/idem/kafkaconsumer => ../kafkaconsumer
	github.com/idemkit/idem/pgstore => ../pgstore
	github.com/idemkit/idem/rabbitconsumer => ../rabbitconsumer
	github.com/idemkit/idem/redisstore => ../redisstore
)

require (
	github.com/aws/aws-lambda-go v1.54.0
	github.com/aws/aws-sdk-go-v2 v1.47.7
	github.com/aws/aws-sdk-go-v2/service/dynamodb v1.73.1
	github.com/aws/aws-sdk-go-v2/service/dynamodbstreams v1.46.6
	github.com/aws/aws-sdk-go-v2/service/kinesis v1.56.11
	github.com/aws/smithy-go v1.28.8
	github.com/idemkit/idem v0.0.0-00010101000000-000000000000
	github.com/idemkit/idem/kafkaconsumer v0.0.0-00010101000000-000000000000
	github.com/idemkit/idem/pgstore v0.0.0-00010101000000-000000000000
	github.com/idemkit/idem/rabbitconsumer v0.0.0-00010101000000-000000000000
	github.com/idemkit/idem/redisstore v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.8.0
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/redis/go-redis/v9 v9.17.3
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.26 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.10 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.10 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.24 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery v1.13.10 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/jmespath-community/go-jmespath v1.1.1 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/rogpeppe/go-internal v1.6.1 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20230314191032-db074128a8ec // indirect
	golang.org/x/sync v0.19.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)
