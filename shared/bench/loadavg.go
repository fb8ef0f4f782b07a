package bench

import (
	"os"
	"strconv"
	"strings"
)

// loadAvg is the machine's one-minute load average (/proc/loadavg), 0
// where there is none.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return v
}
