package releasegate

import "github.com/JorisJonkers-dev/delivery/internal/release"

// The names the demo and the end-to-end tests read, which moved to
// internal/release; they stand here only until those read it themselves.
type (
	// ConfigMap is release.ConfigMap.
	ConfigMap = release.ConfigMap
	// Record is release.Record.
	Record = release.Record
)

// The functions of internal/release the demo and the end-to-end tests read.
var (
	RevisionTag     = release.RevisionTag
	InputsConfigMap = release.InputsConfigMap
	CheckInputs     = release.CheckInputs
	RecordConfigMap = release.RecordConfigMap
	DecodeRecord    = release.DecodeRecord
)
