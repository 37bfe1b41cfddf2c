package postgrescatalog

import (
	"context"
	"net"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Login is a PostgreSQL login: the admin's, read from Vault.
type Login struct {
	Username string
	Password string
}

// Connector opens connections to the catalog's server as the admin login.
type Connector struct {
	Server Server
	Login  Login
	// SSLRootCert is a CA bundle file for verify-ca and verify-full; the
	// system's roots when empty.
	SSLRootCert string
	// Tracer, when set, sees every statement the job sends.
	Tracer pgx.QueryTracer
}

// Connect opens a connection to database.
func (c Connector) Connect(ctx context.Context, database string) (*pgx.Conn, error) {
	q := url.Values{}
	q.Set("sslmode", c.Server.SSLMode)
	if c.SSLRootCert != "" {
		q.Set("sslrootcert", c.SSLRootCert)
	}
	q.Set("application_name", "postgres-catalog")
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(c.Login.Username, c.Login.Password),
		Host:     net.JoinHostPort(c.Server.Host, strconv.Itoa(c.Server.Port)),
		Path:     "/" + database,
		RawQuery: q.Encode(),
	}
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, err
	}
	cfg.Tracer = c.Tracer
	return pgx.ConnectConfig(ctx, cfg)
}

// querier is a connection or a transaction: reads run on either.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sharedQuery reads, from the server-wide catalogs, a Project's two roles
// and its database: owner, memberships and whether they inherit (per grant
// from PostgreSQL 16, read through to_jsonb so that the query runs on a
// server whose pg_auth_members has no inherit_option), the data role's
// CONNECT grant, the
// owner role's members that own objects in the database that REASSIGN OWNED
// hands over (pg_shdepend is shared, so no connection to the database is
// needed; default privileges and user mappings it leaves where they are, so
// counting them would reassign again on every run), which of those are
// superusers, and the other databases and the tablespaces those roles own.
// $1 database, $2 owner role, $3 data role.
const sharedQuery = `
WITH db AS (
  SELECT d.oid, d.datdba, d.datacl FROM pg_database d WHERE d.datname = $1
), owner AS (
  SELECT oid FROM pg_roles WHERE rolname = $2
), members AS (
  SELECT m.member FROM pg_auth_members m JOIN owner o ON m.roleid = o.oid
), holders AS (
  SELECT DISTINCT s.refobjid AS oid FROM pg_shdepend s JOIN db ON s.dbid = db.oid
  WHERE s.deptype = 'o' AND s.refclassid = 'pg_authid'::regclass AND s.refobjid IN (SELECT member FROM members)
    AND s.classid NOT IN ('pg_default_acl'::regclass, 'pg_user_mapping'::regclass)
), project_roles AS (
  SELECT rolname, json_build_object('superuser', rolsuper, 'login', rolcanlogin, 'createRole', rolcreaterole,
      'createDB', rolcreatedb, 'replication', rolreplication, 'bypassRLS', rolbypassrls) AS attributes
  FROM pg_roles WHERE rolname IN ($2, $3)
)
SELECT json_build_object(
  'owner', (SELECT attributes FROM project_roles WHERE rolname = $2),
  'data', (SELECT attributes FROM project_roles WHERE rolname = $3),
  'database', (SELECT json_build_object(
      'owner', r.rolname,
      'ownerSuperuser', r.rolsuper,
      'ownerIsMember', r.oid IN (SELECT member FROM members),
      'ownerInherits', EXISTS (SELECT FROM pg_auth_members m JOIN owner o ON m.roleid = o.oid
          WHERE m.member = r.oid AND COALESCE((to_jsonb(m) ->> 'inherit_option')::boolean, r.rolinherit)),
      'ownerNoInherit', NOT r.rolinherit,
      'grantsInherit', current_setting('server_version_num')::int >= 160000,
      'dataConnect', EXISTS (SELECT 1 FROM aclexplode(db.datacl) a JOIN pg_roles g ON g.oid = a.grantee
                             WHERE g.rolname = $3 AND a.privilege_type = 'CONNECT'),
      'holders', COALESCE((SELECT json_agg(h.rolname ORDER BY h.rolname) FROM pg_roles h WHERE h.oid IN (SELECT oid FROM holders)), '[]'),
      'superuserHolders', COALESCE((SELECT json_agg(h.rolname ORDER BY h.rolname) FROM pg_roles h
          WHERE h.oid IN (SELECT oid FROM holders) AND h.rolsuper), '[]'),
      'holdersNotInheriting', COALESCE((SELECT json_agg(h.rolname ORDER BY h.rolname)
          FROM pg_roles h JOIN pg_auth_members m ON m.member = h.oid JOIN owner o ON m.roleid = o.oid
          WHERE h.oid IN (SELECT oid FROM holders)
            AND NOT COALESCE((to_jsonb(m) ->> 'inherit_option')::boolean, h.rolinherit)), '[]'),
      'tablespaces', COALESCE((SELECT json_object_agg(o.rolname, o.names) FROM (
          SELECT r2.rolname, json_agg(t.spcname ORDER BY t.spcname) AS names
          FROM pg_tablespace t JOIN pg_roles r2 ON r2.oid = t.spcowner
          WHERE t.spcowner = db.datdba OR t.spcowner IN (SELECT oid FROM holders)
          GROUP BY r2.rolname) o), '{}'),
      'otherDatabases', COALESCE((SELECT json_object_agg(o.rolname, o.names) FROM (
          SELECT r2.rolname, json_agg(d2.datname ORDER BY d2.datname) AS names
          FROM pg_database d2 JOIN pg_roles r2 ON r2.oid = d2.datdba
          WHERE d2.datname <> $1 AND (d2.datdba = db.datdba OR d2.datdba IN (SELECT oid FROM holders))
          GROUP BY r2.rolname) o), '{}')
    ) FROM db JOIN pg_roles r ON r.oid = db.datdba)
)`

// insideQuery reads, connected to the Project's database, what the data role
// lacks of the owner's schemas and what the owner's database-wide default
// ACL grants it. $1 owner role, $2 data role.
//
// The owner's schemas are those it owns (or pg_database_owner owns while it
// owns the database), and any other holding a table or sequence it owns,
// such as a public schema a superuser still owns in a database created
// before PostgreSQL 15; a session's temporary schema is none of them. In a
// schema of the owner's own, every table and sequence is the data role's to
// read and write, so what lacks is named by schema; in one it merely uses,
// only the owner's own relations are, so what lacks is named relation by
// relation, and another role's table there (an audit log, say) is left alone.
//
// It is the one statement every run sends to every database, on a backend
// that has just started and has nothing cached, so it is written to touch
// few catalogs: roles are looked up by to_regrole (a cache lookup) rather
// than through the pg_roles view, and the relations are narrowed to the
// owner's schemas (MATERIALIZED keeps the planner from testing privileges
// on every system catalog before the join).
const insideQuery = `
WITH owner AS MATERIALIZED (
  SELECT to_regrole(quote_ident($1)) AS oid
), schemas AS MATERIALIZED (
  SELECT n.oid, n.nspname, (n.nspowner = o.oid
         OR (n.nspowner = 'pg_database_owner'::regrole
             AND (SELECT datdba FROM pg_database WHERE datname = current_database()) = o.oid)) AS owned
  FROM pg_namespace n, owner o
  WHERE n.nspowner = o.oid
     OR (n.nspowner = 'pg_database_owner'::regrole
         AND (SELECT datdba FROM pg_database WHERE datname = current_database()) = o.oid)
     OR EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = n.oid AND c.relowner = o.oid
                AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND c.relpersistence <> 't')
), relations AS MATERIALIZED (
  SELECT c.oid, c.relkind, c.relname, s.nspname, s.owned FROM pg_class c JOIN schemas s ON s.oid = c.relnamespace, owner o
  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND (s.owned OR c.relowner = o.oid)
), lacking AS MATERIALIZED (
  SELECT relkind = 'S' AS sequence, nspname, relname, owned FROM relations
  WHERE CASE WHEN relkind = 'S'
    THEN NOT (has_sequence_privilege($2::name, oid, 'USAGE') AND has_sequence_privilege($2::name, oid, 'SELECT')
              AND has_sequence_privilege($2::name, oid, 'UPDATE'))
    ELSE NOT (has_table_privilege($2::name, oid, 'SELECT') AND has_table_privilege($2::name, oid, 'INSERT')
              AND has_table_privilege($2::name, oid, 'UPDATE') AND has_table_privilege($2::name, oid, 'DELETE'))
    END
)
SELECT json_build_object(
  'schemasWithoutUsage', (SELECT json_agg(nspname) FROM schemas
      WHERE NOT has_schema_privilege($2::name, oid, 'USAGE')),
  'schemasLackingTables', (SELECT json_agg(DISTINCT nspname) FROM lacking WHERE owned AND NOT sequence),
  'schemasLackingSequences', (SELECT json_agg(DISTINCT nspname) FROM lacking WHERE owned AND sequence),
  'tablesLacking', (SELECT json_agg(json_build_array(nspname, relname)) FROM lacking WHERE NOT owned AND NOT sequence),
  'sequencesLacking', (SELECT json_agg(json_build_array(nspname, relname)) FROM lacking WHERE NOT owned AND sequence),
  'defaults', (SELECT json_object_agg(a.defaclobjtype, ARRAY(
        SELECT e.privilege_type FROM aclexplode(a.defaclacl) e WHERE e.grantee = to_regrole(quote_ident($2::name))))
      FROM pg_default_acl a, owner o WHERE a.defaclrole = o.oid AND a.defaclnamespace = 0)
)`

func readShared(ctx context.Context, q querier, p Project) (Shared, error) {
	var s Shared
	err := q.QueryRow(ctx, sharedQuery, p.Database, p.OwnerRole, p.DataRole).Scan(&s)
	return s, err
}

func readInside(ctx context.Context, q querier, p Project) (Inside, error) {
	var in Inside
	err := q.QueryRow(ctx, insideQuery, p.OwnerRole, p.DataRole).Scan(&in)
	return in, err
}
