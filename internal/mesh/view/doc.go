// Package view is the mesh's view of a delivery: from the source revision
// CI wrote (source.main), the wants and the haves, whether the revision is
// delivered, and per module and node whether it is moving, settled or
// stuck. Judge is the pure part; View watches the bus, says each event once
// (a JSON log line and a message on mesh.events.<kind>) and remembers what
// it said on the bus, so a restarted view does not say it again.
package view
