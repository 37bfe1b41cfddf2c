// Package postgrescatalog applies a PostgreSQL server's database catalog: for
// each consuming Project an owner and a data role, the Project's database
// owned by the owner, the data role's read and write grants, and the two Vault
// database roles that issue logins acting as those roles. It reads first and
// changes only what differs, never drops anything, and quotes every
// identifier with pgx's sanitising.
package postgrescatalog
