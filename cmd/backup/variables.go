package main

import (
	"slices"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// sharedVariables stand, in the help of backup itself, for the variables
// more than one method reads, each named once for all of them.
var sharedVariables = map[string]settings.Variable{
	"BACKUP_HOST": {Name: "BACKUP_HOST", Default: "required for postgres, rabbitmq", Meaning: "the server or the management API's host"},
	"BACKUP_PORT": {Name: "BACKUP_PORT", Default: "5432 / 15672", Meaning: "postgres, rabbitmq: its port"},
}

// methodVariables are the variables of every method, in the order the
// methods name them, each once.
func methodVariables() []settings.Variable {
	var all []settings.Variable
	seen := map[string]bool{}
	for _, m := range backup.Methods() {
		for _, v := range m.Variables() {
			if seen[v.Name] {
				continue
			}
			seen[v.Name] = true
			if shared, ok := sharedVariables[v.Name]; ok {
				v = shared
			}
			all = append(all, v)
		}
	}
	return all
}

// variablesOf are the variables command reads; "backup" reads them all.
func variablesOf(command string) []settings.Variable {
	if m, ok := backup.MethodNamed(command); ok {
		return backup.VariablesOf(m)
	}
	switch command {
	case "restore":
		return slices.Concat([]settings.Variable{{Name: backup.ClaimVariable.Name, Default: backup.ClaimVariable.Default,
			Meaning: "the backup claim, read with --claim"}}, backup.DestinationVariables)
	case "drill":
		return backup.DestinationVariables
	case "backup":
		return slices.Concat(backup.JobVariables, methodVariables(), backup.DestinationVariables, backup.CopyVariables)
	default:
		return nil
	}
}
