package ctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// fakePages serves ids in pages of size, each token the last id of its
// page; next, when set, replaces the token a page gives.
func fakePages(ids []string, size int, next func(page int, token string) string) (listPage, *[]*ahpv1.ListRecordingsRequest) {
	var asked []*ahpv1.ListRecordingsRequest
	return func(_ context.Context, req *ahpv1.ListRecordingsRequest) (*ahpv1.ListRecordingsResponse, error) {
		asked = append(asked, &ahpv1.ListRecordingsRequest{Channel: req.Channel, PageSize: req.PageSize, PageToken: req.PageToken})
		start := 0
		if req.PageToken != "" {
			start = slices.Index(ids, req.PageToken) + 1
		}
		n := size
		if req.PageSize > 0 {
			n = min(n, int(req.PageSize))
		}
		end := min(len(ids), start+n)
		res := &ahpv1.ListRecordingsResponse{}
		for _, id := range ids[start:end] {
			res.Recordings = append(res.Recordings, &ahpv1.Recording{Id: id})
		}
		if end < len(ids) {
			res.NextPageToken = ids[end-1]
		}
		if next != nil {
			res.NextPageToken = next(len(asked), res.NextPageToken)
		}
		return res, nil
	}, &asked
}

func idsOf(recs []*ahpv1.Recording) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.GetId()
	}
	return out
}

// TestListRecordingsFollowsPages: ahpctl recordings list asks for every
// page, with the channel each time, or for the newest limit; a daemon
// repeating a token, or giving tokens without end, is an error after a
// bounded number of pages.
func TestListRecordingsFollowsPages(t *testing.T) {
	var all []string
	for i := range 25 {
		all = append(all, fmt.Sprintf("r%02d", i))
	}
	for _, tc := range []struct {
		size, limit int
		want        []string
		calls       int
	}{
		{7, 0, all, 4},
		{25, 0, all, 1},
		{100, 0, all, 1},
		{7, 10, all[:10], 2},
		{7, 7, all[:7], 1},
		{7, 30, all, 4},
	} {
		list, asked := fakePages(all, tc.size, nil)
		got, err := listRecordings(context.Background(), list, &ahpv1.ListRecordingsRequest{Channel: "ahp-terminal:/x"}, tc.limit)
		if err != nil || !slices.Equal(idsOf(got), tc.want) || len(*asked) != tc.calls {
			t.Errorf("pages of %d, limit %d: %v in %d calls, %v; want %v in %d", tc.size, tc.limit, idsOf(got), len(*asked), err, tc.want, tc.calls)
		}
		for _, r := range *asked {
			if r.Channel != "ahp-terminal:/x" || tc.limit == 0 && r.PageSize != 0 || tc.limit > 0 && r.PageSize < 1 {
				t.Errorf("pages of %d, limit %d: asked %v", tc.size, tc.limit, r)
			}
		}
	}

	// The same token twice, at once or after another: an error.
	for name, next := range map[string]func(int, string) string{
		"repeated": func(int, string) string { return "r04" },
		"cycle":    func(page int, _ string) string { return []string{"r04", "r09"}[page%2] },
	} {
		list, asked := fakePages(all, 5, next)
		if _, err := listRecordings(context.Background(), list, &ahpv1.ListRecordingsRequest{}, 0); err == nil || !strings.Contains(err.Error(), "twice") || len(*asked) > 3 {
			t.Errorf("%s token: %v after %d calls, want an error after at most 3", name, err, len(*asked))
		}
	}
	// Tokens without end: stopped at maxListPages.
	calls := 0
	endless := func(context.Context, *ahpv1.ListRecordingsRequest) (*ahpv1.ListRecordingsResponse, error) {
		calls++
		return &ahpv1.ListRecordingsResponse{NextPageToken: fmt.Sprint(calls)}, nil
	}
	if _, err := listRecordings(context.Background(), endless, &ahpv1.ListRecordingsRequest{}, 0); err == nil || calls != maxListPages {
		t.Errorf("endless tokens: %v after %d calls, want an error after %d", err, calls, maxListPages)
	}
	// A page's error ends the list with it.
	boom := errors.New("boom")
	failing := func(context.Context, *ahpv1.ListRecordingsRequest) (*ahpv1.ListRecordingsResponse, error) {
		return nil, boom
	}
	if _, err := listRecordings(context.Background(), failing, &ahpv1.ListRecordingsRequest{}, 0); !errors.Is(err, boom) {
		t.Errorf("failing page: %v", err)
	}
}
