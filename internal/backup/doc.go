// Package backup writes one generation of a volume, a PostgreSQL server or a
// RabbitMQ broker's definitions per run onto the backup claim, atomically, and
// prunes the claim to the generations the retention keeps. Decisions (names,
// what to prune) are pure functions of plain values; the methods that produce
// a generation's bytes sit behind the Method interface.
package backup
