// Command postgres-catalog applies a PostgreSQL server's database catalog
// once and exits: 0 when the server and Vault hold the catalog, 2 on a bad
// setting (nothing was done), 1 on a refused catalog or a failed step.
package main
