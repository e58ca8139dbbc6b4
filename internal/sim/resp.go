package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// readFrame reads one whole RESP2 or RESP3 value from r and returns its
// bytes as they came, so that a link can hold, drop or pass on whole
// requests and replies.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var buf bytes.Buffer
	if err := copyValue(r, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func copyValue(r *bufio.Reader, buf *bytes.Buffer) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	buf.Write(line)
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("sim: malformed RESP line %q", line)
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '!', '=':
		if err != nil || n < 0 {
			return nil // a null bulk string
		}
		data := make([]byte, n+2)
		if _, err := readFull(r, data); err != nil {
			return err
		}
		buf.Write(data)
		return nil
	case '*', '~', '>', '%', '|':
		if err != nil || n < 0 {
			return nil // a null array
		}
		return copyElements(r, buf, line[0], n)
	}
	return fmt.Errorf("sim: unknown RESP type %q", line[0])
}

// copyElements copies the n elements of an aggregate of type t.
func copyElements(r *bufio.Reader, buf *bytes.Buffer, t byte, n int) error {
	if t == '%' || t == '|' {
		n *= 2
	}
	for range n {
		if err := copyValue(r, buf); err != nil {
			return err
		}
	}
	if t == '|' { // an attribute precedes the value it describes
		return copyValue(r, buf)
	}
	return nil
}

func readFull(r *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// command returns the upper-cased name of the command a request frame
// carries (an array of bulk strings), "" when it is not one.
func command(frame []byte) string {
	if len(frame) == 0 || frame[0] != '*' {
		return ""
	}
	i := bytes.Index(frame, []byte("\r\n$"))
	if i < 0 {
		return ""
	}
	rest := frame[i+3:]
	j := bytes.Index(rest, []byte("\r\n"))
	if j < 0 {
		return ""
	}
	n, err := strconv.Atoi(string(rest[:j]))
	if err != nil || j+2+n > len(rest) {
		return ""
	}
	return strings.ToUpper(string(rest[j+2 : j+2+n]))
}

// isPush reports whether a frame from a server is a pub/sub message
// rather than a reply: a RESP3 push, or on RESP2 an array that starts with
// "message" or "smessage".
func isPush(frame []byte) bool {
	if len(frame) == 0 {
		return false
	}
	if frame[0] == '>' {
		return bytes.Contains(frame[:min(len(frame), 32)], []byte("message"))
	}
	return frame[0] == '*' && (bytes.HasPrefix(frame[bytes.IndexByte(frame, '\n')+1:], []byte("$7\r\nmessage")) ||
		bytes.HasPrefix(frame[bytes.IndexByte(frame, '\n')+1:], []byte("$8\r\nsmessage")))
}

var errRefused = errors.New("connect: connection refused")
