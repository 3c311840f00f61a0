package fleetbundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Hash is a short hash of v's JSON encoding.
func Hash(v any) string {
	raw, err := json.Marshal(v) // map keys are sorted: the same content, the same bytes
	if err != nil {
		panic(fmt.Sprintf("marshalling for a hash: %v", err)) // plain maps and strings cannot fail
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
