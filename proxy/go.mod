module github.com/pgcipher/pgcipher/proxy

go 1.24
