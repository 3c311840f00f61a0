// Package optionstest checks how a package applies the defaults of its Options struct: zero
// and negative numbers and durations both mean "unset", as the controllers' Options document.
package optionstest

import (
	"reflect"
	"testing"
)

// CheckDefaults fails t unless apply (the package's one place that applies defaults) gives an
// Options whose every int and time.Duration field is set to -1 the same result as the zero
// Options, and that result has no zero number or duration left.
func CheckDefaults[T any](t *testing.T, apply func(*T)) {
	t.Helper()
	var zero, negative T
	apply(&zero)
	v := reflect.ValueOf(&negative).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.CanSet() && f.CanInt() {
			f.SetInt(-1)
		}
	}
	apply(&negative)
	if !reflect.DeepEqual(negative, zero) {
		t.Errorf("negative numbers gave\n%+v\nwant the defaults\n%+v", negative, zero)
	}
	z := reflect.ValueOf(zero)
	for i := range z.NumField() {
		if f := z.Field(i); f.CanInt() && f.Int() == 0 {
			t.Errorf("%s has no default", z.Type().Field(i).Name)
		}
	}
}
