module github.com/idemkit/idem/redisstore

go 1.24.0

// The store is developed beside the library it implements; a release pins a tagged idem.
replace github.com/idemkit/idem => ../

require (
	github.com/idemkit/idem v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.17.3
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
