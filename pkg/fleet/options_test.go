package fleet

import (
	"testing"

	"configbundle.dev/hub/internal/testing/optionstest"
)

// TestOptionsDefaults: a zero or negative number or duration takes its default.
func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	optionstest.CheckDefaults(t, (*Options).defaults)
}
