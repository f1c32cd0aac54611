module github.com/pgcipher/pgcipher/proxy

go 1.25.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/pganalyze/pg_query_go/v6 v6.2.5
	google.golang.org/protobuf v1.33.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.41.0 // indirect
)
