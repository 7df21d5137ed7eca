/*
 * The Date header's value, cached per loop (nginx's ngx_cached_http_time): formatted when the
 * loop's clock reaches the wall clock's next second, the same text in between. A server
 * answering thousands of requests a second formats it once a second, not once a request.
 */
#include "codec/http/internal.h"
#include "reactor/layer.h"

#include <string.h>
#include <time.h>

typedef struct http_date_s {
    bool set;
    int64_t due_ns;                    /* the loop's clock when the wall clock's second ends */
    char text[EDDY_HTTP_DATE_LEN + 1]; /* NUL-terminated */
} http_date_t;

/* The key of the cache among the loop's locals: its address. */
static const char date_key;

static void put2(char *p, int v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

void eddy__http_date_format(int64_t t, char *out)
{
    /* The names by hand: strftime's %a and %b follow the locale, and the header must be
     * English whatever setlocale() the application made (RFC 9110 section 5.6.7). */
    static const char days[] = "SunMonTueWedThuFriSat";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        tt = 0; /* past what four digits say: the epoch rather than a malformed header */
        gmtime_r(&tt, &tm);
    }
    memcpy(out, days + 3 * tm.tm_wday, 3);
    memcpy(out + 3, ", ", 2);
    put2(out + 5, tm.tm_mday);
    out[7] = ' ';
    memcpy(out + 8, months + 3 * tm.tm_mon, 3);
    out[11] = ' ';
    int year = tm.tm_year + 1900;
    put2(out + 12, year / 100);
    put2(out + 14, year % 100);
    out[16] = ' ';
    put2(out + 17, tm.tm_hour);
    out[19] = ':';
    put2(out + 20, tm.tm_min);
    out[22] = ':';
    put2(out + 23, tm.tm_sec);
    memcpy(out + 25, " GMT", 5); /* with the NUL */
}

const char *eddy_http_date(eddy_loop_t *loop)
{
    /* Without memory for the loop's cache (its first call only), a buffer of the thread's,
     * formatted every call: slower, never NULL. */
    static _Thread_local http_date_t spare;
    http_date_t *d = eddy__loop_local(loop, &date_key, sizeof(*d));
    if (d == NULL) {
        d = &spare;
        d->set = false;
    }
    int64_t now = eddy_loop_now_ns(loop);
    if (!d->set || now >= d->due_ns) {
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        eddy__http_date_format((int64_t)wall.tv_sec, d->text);
        /* Due again when this wall second ends, by the loop's clock: a virtual clock (an
         * embedded channel's) decides when, the wall clock what. */
        d->due_ns = now + (1000000000 - wall.tv_nsec);
        d->set = true;
    }
    return d->text;
}
