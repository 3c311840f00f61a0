package fleetbundle

import (
	"fmt"
	"strings"
)

// MaxMessageBytes is the longest message of a failedClusters entry.
const MaxMessageBytes = 1024

// Truncate shortens a message to MaxMessageBytes, on a UTF-8 boundary.
func Truncate(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	s = strings.ToValidUTF8(s[:MaxMessageBytes-3], "")
	return s + "..."
}

// ListNames names up to five members, and how many more there are.
func ListNames(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}
