package spokeprovider

// CreateCRD is createCRD, for the tests of the suite: the create of a CRD that never replaces
// one.
var CreateCRD = createCRD
