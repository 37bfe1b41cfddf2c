// Command hello prints its --version line, so a test sees what a binary
// built for an image reports.
package main

import (
	"fmt"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

func main() { fmt.Println(cli.VersionLine("hello")) }
