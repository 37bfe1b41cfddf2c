package postgrescatalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Step names the part of a Project's apply a statement or a failure belongs
// to, in the order the steps run.
type Step string

// The steps of one Project's apply.
const (
	StepConnect  Step = "connect"
	StepRead     Step = "read"
	StepLock     Step = "lock"
	StepBegin    Step = "begin"
	StepRoles    Step = "roles"
	StepDatabase Step = "create database"
	StepAdopt    Step = "adopt"
	StepReassign Step = "reassign"
	StepGrants   Step = "grants"
	StepCommit   Step = "commit"
	StepVault    Step = "vault roles"
)

// Statement is one change to issue, with the step it belongs to.
type Statement struct {
	Step Step
	SQL  string
}

// Privileges the data role holds: read and write, never ownership, TRUNCATE,
// REFERENCES or TRIGGER.
var (
	tablePrivileges    = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}
	sequencePrivileges = []string{"USAGE", "SELECT", "UPDATE"}
	schemaPrivileges   = []string{"USAGE"}
)

// Default-ACL object types as pg_default_acl spells them.
const (
	defaultTables    = "r"
	defaultSequences = "S"
	defaultSchemas   = "n"
)

// Role is a role as far as the catalog cares: the attributes that let it do
// more than its grants say.
type Role struct {
	Superuser   bool `json:"superuser"`
	Login       bool `json:"login"`
	CreateRole  bool `json:"createRole"`
	CreateDB    bool `json:"createDB"`
	Replication bool `json:"replication"`
	BypassRLS   bool `json:"bypassRLS"`
}

// powers names the attributes r holds that a Project's role, created
// NOLOGIN with nothing more, never does. Every data login Vault issues takes
// the data role on, with whatever it holds.
func (r Role) powers() []string {
	var out []string
	for _, a := range []struct {
		held bool
		name string
	}{{r.Login, "LOGIN"}, {r.CreateRole, "CREATEROLE"}, {r.CreateDB, "CREATEDB"}, {r.Replication, "REPLICATION"}, {r.BypassRLS, "BYPASSRLS"}} {
		if a.held {
			out = append(out, a.name)
		}
	}
	return out
}

// Shared is what the server-wide catalogs say about one Project: its two
// roles and its database, read before anything changes.
type Shared struct {
	// Owner and Data are nil where the role is absent.
	Owner *Role `json:"owner"`
	Data  *Role `json:"data"`
	// Database is nil where the database is absent.
	Database *DatabaseState `json:"database"`
}

// DatabaseState is an existing database.
type DatabaseState struct {
	Owner          string `json:"owner"`
	OwnerSuperuser bool   `json:"ownerSuperuser"`
	// OwnerIsMember says the database's owner is already a member of the
	// Project's owner role.
	OwnerIsMember bool `json:"ownerIsMember"`
	// OwnerInherits says that membership passes the owner role's
	// privileges on without SET ROLE; OwnerNoInherit that the database's
	// owner is a NOINHERIT role. GrantsInherit says the server takes
	// GRANT ... WITH INHERIT TRUE (PostgreSQL 16 and later).
	OwnerInherits  bool `json:"ownerInherits"`
	OwnerNoInherit bool `json:"ownerNoInherit"`
	GrantsInherit  bool `json:"grantsInherit"`
	// DataConnect says the data role holds an explicit CONNECT grant.
	DataConnect bool `json:"dataConnect"`
	// Holders are members of the owner role that own objects in the database:
	// adopted roles that created something since.
	Holders []string `json:"holders"`
	// SuperuserHolders are the holders that are superusers;
	// HoldersNotInheriting those whose membership does not pass the owner
	// role's privileges on without SET ROLE.
	SuperuserHolders     []string `json:"superuserHolders"`
	HoldersNotInheriting []string `json:"holdersNotInheriting"`
	// OtherDatabases and Tablespaces map the database's owner and each
	// holder to the other databases and the tablespaces it owns, which
	// REASSIGN OWNED would hand over too.
	OtherDatabases map[string][]string `json:"otherDatabases"`
	Tablespaces    map[string][]string `json:"tablespaces"`
}

// alsoHandedOver is what REASSIGN OWNED BY role would hand over beyond this
// database: the other databases and the tablespaces it owns, in words; ""
// when nothing.
func (d *DatabaseState) alsoHandedOver(role string) string {
	var what []string
	if dbs := d.OtherDatabases[role]; len(dbs) > 0 {
		what = append(what, "database "+strings.Join(dbs, ", "))
	}
	if spaces := d.Tablespaces[role]; len(spaces) > 0 {
		what = append(what, "tablespace "+strings.Join(spaces, ", "))
	}
	return strings.Join(what, " and ")
}

// Inside is what the database itself says about the owner's schemas and the
// data role's privileges.
type Inside struct {
	SchemasWithoutUsage    []string `json:"schemasWithoutUsage"`
	SchemasLackingTables   []string `json:"schemasLackingTables"`
	SchemasLackingSequence []string `json:"schemasLackingSequences"`
	// TablesLacking and SequencesLacking are the owner's own relations,
	// each [schema, name], that the data role cannot read and write in a
	// schema another role owns.
	TablesLacking    [][2]string `json:"tablesLacking"`
	SequencesLacking [][2]string `json:"sequencesLacking"`
	// Defaults maps a pg_default_acl object type to what the owner's
	// database-wide default ACL grants the data role.
	Defaults map[string][]string `json:"defaults"`
}

// Refusal is a state the catalog will not change by itself.
type Refusal struct {
	Step   Step
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// PlanShared decides steps 1 to 4 and the database's CONNECT grant from the
// server-wide state: what to create, whether to create the database, what to
// adopt and what to reassign. CreateDatabase is issued alone, outside any
// transaction, between the roles and the rest.
func PlanShared(p Project, s Shared) (roles []Statement, createDatabase *Statement, rest []Statement, err error) {
	owner, data, db := ident(p.OwnerRole), ident(p.DataRole), ident(p.Database)
	for _, r := range []struct {
		name string
		have *Role
	}{{p.OwnerRole, s.Owner}, {p.DataRole, s.Data}} {
		if r.have == nil {
			roles = append(roles, Statement{StepRoles, "CREATE ROLE " + ident(r.name) + " NOLOGIN"})
			continue
		}
		switch powers := r.have.powers(); {
		case r.have.Superuser:
			return nil, nil, nil, &Refusal{StepRoles, fmt.Sprintf("role %s is a superuser; a Project's role never is", r.name)}
		case len(powers) > 0:
			return nil, nil, nil, &Refusal{StepRoles, fmt.Sprintf("role %s holds %s; a Project's role holds none of them",
				r.name, strings.Join(powers, ", "))}
		}
	}
	d := s.Database
	if d == nil {
		createDatabase = &Statement{StepDatabase, "CREATE DATABASE " + db + " OWNER " + owner}
		rest = append(rest, Statement{StepGrants, "GRANT CONNECT ON DATABASE " + db + " TO " + data})
		return roles, createDatabase, rest, nil
	}
	adopted := ""
	if d.Owner != p.OwnerRole {
		switch others := d.alsoHandedOver(d.Owner); {
		case d.OwnerSuperuser:
			return nil, nil, nil, &Refusal{StepAdopt, fmt.Sprintf("database %s is owned by superuser %s; hand it to an ordinary role first", p.Database, d.Owner)}
		case d.Owner == p.DataRole:
			return nil, nil, nil, &Refusal{StepAdopt, fmt.Sprintf("database %s is owned by its data role %s", p.Database, d.Owner)}
		case others != "":
			return nil, nil, nil, &Refusal{StepAdopt, fmt.Sprintf("database %s is owned by %s, which also owns %s; REASSIGN OWNED would hand those over too",
				p.Database, d.Owner, others)}
		}
		if !d.OwnerInherits && !d.GrantsInherit && (d.OwnerNoInherit || d.OwnerIsMember) {
			return nil, nil, nil, &Refusal{StepAdopt, fmt.Sprintf("database %s is owned by %s, which does not inherit; its logins would lose what it owns to %s",
				p.Database, d.Owner, p.OwnerRole)}
		}
		adopted = d.Owner
		old := ident(d.Owner)
		rest = append(rest, Statement{StepAdopt, "ALTER DATABASE " + db + " OWNER TO " + owner})
		switch {
		case d.OwnerInherits:
		case d.GrantsInherit:
			// Whatever the role's own default, this membership inherits, so
			// the old logins keep what they owned without SET ROLE.
			rest = append(rest, Statement{StepAdopt, "GRANT " + owner + " TO " + old + " WITH INHERIT TRUE"})
		default:
			rest = append(rest, Statement{StepAdopt, "GRANT " + owner + " TO " + old})
		}
		rest = append(rest, Statement{StepAdopt, "REASSIGN OWNED BY " + old + " TO " + owner})
	}
	holders := slices.Clone(d.Holders)
	slices.Sort(holders)
	for _, h := range holders {
		if h == adopted || h == p.OwnerRole {
			continue
		}
		if slices.Contains(d.SuperuserHolders, h) {
			return nil, nil, nil, &Refusal{StepReassign, fmt.Sprintf("superuser %s, a member of %s, owns objects in %s; a superuser's objects are not handed to an ordinary role",
				h, p.OwnerRole, p.Database)}
		}
		if others := d.alsoHandedOver(h); others != "" {
			return nil, nil, nil, &Refusal{StepReassign, fmt.Sprintf("%s owns objects in %s and also owns %s; REASSIGN OWNED would hand those over too",
				h, p.Database, others)}
		}
		if slices.Contains(d.HoldersNotInheriting, h) {
			// As at adoption: what it made goes to the owner role, and its
			// logins keep it only through a membership that inherits.
			if !d.GrantsInherit {
				return nil, nil, nil, &Refusal{StepReassign, fmt.Sprintf("%s owns objects in %s but does not inherit %s; its logins would lose them",
					h, p.Database, p.OwnerRole)}
			}
			rest = append(rest, Statement{StepReassign, "GRANT " + owner + " TO " + ident(h) + " WITH INHERIT TRUE"})
		}
		rest = append(rest, Statement{StepReassign, "REASSIGN OWNED BY " + ident(h) + " TO " + owner})
	}
	if !d.DataConnect {
		rest = append(rest, Statement{StepGrants, "GRANT CONNECT ON DATABASE " + db + " TO " + data})
	}
	return roles, nil, rest, nil
}

// PlanGrants decides step 5 inside the database: USAGE on each of the
// owner's schemas, read and write on every table and sequence in the schemas
// it owns and on its own tables and sequences in schemas it does not, and
// the owner's database-wide default privileges, which cover what the owner
// creates later in any schema.
func PlanGrants(p Project, in Inside) []Statement {
	owner, data := ident(p.OwnerRole), ident(p.DataRole)
	var out []Statement
	for _, s := range sorted(in.SchemasWithoutUsage) {
		out = append(out, Statement{StepGrants, "GRANT USAGE ON SCHEMA " + ident(s) + " TO " + data})
	}
	for _, s := range sorted(in.SchemasLackingTables) {
		out = append(out, Statement{StepGrants, "GRANT " + strings.Join(tablePrivileges, ", ") + " ON ALL TABLES IN SCHEMA " + ident(s) + " TO " + data})
	}
	for _, s := range sorted(in.SchemasLackingSequence) {
		out = append(out, Statement{StepGrants, "GRANT " + strings.Join(sequencePrivileges, ", ") + " ON ALL SEQUENCES IN SCHEMA " + ident(s) + " TO " + data})
	}
	for _, r := range sortedRelations(in.TablesLacking) {
		out = append(out, Statement{StepGrants, "GRANT " + strings.Join(tablePrivileges, ", ") + " ON TABLE " + r + " TO " + data})
	}
	for _, r := range sortedRelations(in.SequencesLacking) {
		out = append(out, Statement{StepGrants, "GRANT " + strings.Join(sequencePrivileges, ", ") + " ON SEQUENCE " + r + " TO " + data})
	}
	for _, d := range []struct {
		objtype, keyword string
		want             []string
	}{{defaultTables, "TABLES", tablePrivileges}, {defaultSequences, "SEQUENCES", sequencePrivileges}, {defaultSchemas, "SCHEMAS", schemaPrivileges}} {
		if !holdsAll(in.Defaults[d.objtype], d.want) {
			out = append(out, Statement{StepGrants, "ALTER DEFAULT PRIVILEGES FOR ROLE " + owner + " GRANT " + strings.Join(d.want, ", ") + " ON " + d.keyword + " TO " + data})
		}
	}
	return out
}

func holdsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// sortedRelations is each [schema, name] as one quoted, qualified name, in order.
func sortedRelations(relations [][2]string) []string {
	out := make([]string, 0, len(relations))
	for _, r := range relations {
		out = append(out, pgx.Identifier{r[0], r[1]}.Sanitize())
	}
	return sorted(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
