/*
 * Self-signed certificates (Netty's SelfSignedCertificate), made with OpenSSL's EVP and X509
 * APIs at run time: an EC P-256 key, a v3 certificate signed by that key with SHA-256, the
 * host name as subject CN and as subjectAltName. For tests and examples only: nobody can
 * check such a certificate but the one who trusts it by hand.
 */
#include "pipeline/tls/internal.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct eddy_tls_self_signed_s {
    char *cert_pem;
    char *key_pem;
};

/* The contents of a memory BIO as a NUL-terminated string of our own, or NULL. */
static char *bio_text(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s != NULL) {
        memcpy(s, data, (size_t)n);
        s[n] = '\0';
    }
    return s;
}

/* subjectAltName for cn: "DNS:cn" or "IP:cn", and 127.0.0.1 for localhost. */
static int add_san(X509 *x, const char *cn)
{
    char san[300];
    if (eddy__tls_is_ip(cn)) {
        snprintf(san, sizeof(san), "IP:%s", cn);
    } else if (strcmp(cn, "localhost") == 0) {
        snprintf(san, sizeof(san), "DNS:localhost,IP:127.0.0.1,IP:::1");
    } else {
        snprintf(san, sizeof(san), "DNS:%s", cn);
    }
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
    int ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

static X509 *make_cert(EVP_PKEY *key, const char *cn, int days)
{
    X509 *x = X509_new();
    if (x == NULL) {
        return NULL;
    }
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    ASN1_INTEGER *sn = NULL;
    /* An expired certificate for tests: valid for one day that ended -days days ago. */
    long from = days >= 0 ? 0 : (long)(days - 1) * 86400;
    long until = days >= 0 ? (long)days * 86400 : (long)days * 86400;
    bool ok = X509_set_version(x, 2) == 1 && RAND_bytes(serial, sizeof(serial)) == 1 &&
              (serial[0] &= 0x7f, (bn = BN_bin2bn(serial, sizeof(serial), NULL)) != NULL) &&
              (sn = BN_to_ASN1_INTEGER(bn, NULL)) != NULL && X509_set_serialNumber(x, sn) == 1 &&
              X509_gmtime_adj(X509_getm_notBefore(x), from) != NULL &&
              X509_gmtime_adj(X509_getm_notAfter(x), until) != NULL && X509_set_pubkey(x, key) == 1;
    X509_NAME *name = ok ? X509_get_subject_name(x) : NULL;
    ok = ok && name != NULL &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                    0) == 1 &&
         X509_set_issuer_name(x, name) == 1 && add_san(x, cn) == 0 &&
         X509_sign(x, key, EVP_sha256()) > 0;
    ASN1_INTEGER_free(sn);
    BN_free(bn);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

int eddy_tls_self_signed_new(const char *cn, int days, eddy_tls_self_signed_t **out)
{
    *out = NULL;
    if (cn == NULL) {
        cn = "localhost";
    }
    if (days == 0) {
        days = 365;
    }
    eddy_tls_self_signed_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return EDDY_ENOMEM;
    }
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = key != NULL ? make_cert(key, cn, days) : NULL;
    BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
    int rc = EDDY_ETLS;
    if (x != NULL && cb != NULL && kb != NULL && PEM_write_bio_X509(cb, x) == 1 &&
        PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) == 1) {
        s->cert_pem = bio_text(cb);
        s->key_pem = bio_text(kb);
        rc = s->cert_pem != NULL && s->key_pem != NULL ? 0 : EDDY_ENOMEM;
    }
    BIO_free(cb);
    BIO_free(kb);
    X509_free(x);
    EVP_PKEY_free(key);
    ERR_clear_error();
    if (rc != 0) {
        eddy_tls_self_signed_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void eddy_tls_self_signed_free(eddy_tls_self_signed_t *s)
{
    if (s == NULL) {
        return;
    }
    if (s->key_pem != NULL) {
        OPENSSL_cleanse(s->key_pem, strlen(s->key_pem));
    }
    free(s->key_pem);
    free(s->cert_pem);
    free(s);
}

const char *eddy_tls_self_signed_cert_pem(const eddy_tls_self_signed_t *s)
{
    return s->cert_pem;
}

const char *eddy_tls_self_signed_key_pem(const eddy_tls_self_signed_t *s)
{
    return s->key_pem;
}

static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        return -errno;
    }
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0) {
            int err = -errno;
            close(fd);
            return err;
        }
        done += (size_t)w;
    }
    return close(fd) == 0 ? 0 : -errno;
}

int eddy_tls_self_signed_write(const eddy_tls_self_signed_t *s, const char *cert_file,
                               const char *key_file)
{
    int rc = write_file(cert_file, s->cert_pem, 0644);
    return rc != 0 ? rc : write_file(key_file, s->key_pem, 0600);
}
