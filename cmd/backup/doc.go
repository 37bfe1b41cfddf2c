// Command backup writes one generation of a volume (files), a PostgreSQL
// server (postgres) or a RabbitMQ broker's definitions (rabbitmq) onto the
// backup claim, copies it off the cluster when a destination is set, prunes,
// and exits: 0 only when the generation is complete and durable (and, with a
// destination, copied and verified). "backup restore" and "backup drill" read
// the generations back.
package main
