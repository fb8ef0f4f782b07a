package format

import "fmt"

// SlotKey is a chain slot's key, identical in every bucket of the set:
// chains/<star>/<epoch>/<slot>, numbers zero-padded to 20 digits.
func SlotKey(star string, epoch, slot uint64) string {
	return fmt.Sprintf("chains/%s/%020d/%020d", star, epoch, slot)
}

// SettledKey is a settled object's key in the settled bucket:
// streams/<stream-id>/<first-seq>-<last-seq>, seqs zero-padded to 20 digits.
func SettledKey(stream StreamID, first, last uint64) string {
	return fmt.Sprintf("streams/%s/%020d-%020d", stream, first, last)
}
