// Go net/http at the boundary: one request, then one after each pause.
//
// Usage: go run pauses.go MODE URL PAUSE_S...
// MODE is `advised` (IdleConnTimeout 1900 ms, the advice table's setting
// for a safe value of 1,900 ms) or `nopool` (DisableKeepAlives: true).
// Prints `version V`, then `ok STATUS` or `error WHAT` per request; exits 1
// if any failed.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"
)

func main() {
	mode, url, pauses := os.Args[1], os.Args[2], os.Args[3:]
	transport := &http.Transport{}
	if mode == "advised" {
		transport.IdleConnTimeout = 1900 * time.Millisecond
	} else {
		transport.DisableKeepAlives = true
	}
	client := &http.Client{Transport: transport}
	fmt.Println("version", runtime.Version())
	failures := 0
	for i := -1; i < len(pauses); i++ {
		if i >= 0 {
			seconds, _ := strconv.ParseFloat(pauses[i], 64)
			time.Sleep(time.Duration(seconds * float64(time.Second)))
		}
		response, err := client.Get(url)
		if err != nil {
			failures++
			fmt.Println("error", err)
			continue
		}
		io.Copy(io.Discard, response.Body)
		response.Body.Close()
		fmt.Println("ok", response.StatusCode)
	}
	if failures > 0 {
		os.Exit(1)
	}
}
