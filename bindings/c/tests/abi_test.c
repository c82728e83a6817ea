/* The C ABI's conventions, checked from C: every entry point refuses NULL,
 * never-issued, deleted and foreign handles and out-of-range values with the
 * documented status instead of crashing. */
#include <otsession.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static int log_calls = 0;
static void *seen_user_data = NULL;
static void count_log(int level, const char *message, void *user_data) {
    (void)level; (void)message;
    log_calls++;
    seen_user_data = user_data;
}

static void test_global(void) {
    EXPECT(strcmp(ot_status_message(OT_OK), "ok") == 0);
    EXPECT(strstr(ot_status_message(OT_ERR_AUTHORIZATION_FAILURE), "authorization") != NULL);
    EXPECT(strcmp(ot_status_message(-5), "unknown status code") == 0);
    EXPECT(ot_log_set_level(-1) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_log_set_level(6) == OT_ERR_INVALID_PARAM);
    int marker = 7;
    EXPECT(ot_log_set_callback(count_log, &marker) == OT_OK);
    EXPECT(ot_log_set_level(OT_LOG_INFO) == OT_OK);
    EXPECT(log_calls == 1 && seen_user_data == &marker);
    EXPECT(ot_log_set_callback(NULL, NULL) == OT_OK);
    EXPECT(ot_log_set_level(OT_LOG_WARN) == OT_OK);
    EXPECT(log_calls == 1);
}

/* Calls every function that takes a session handle with `s` and expects `want`. */
static void expect_session_calls(ot_session *s, ot_status want) {
    char buf[OT_ID_BUFFER_SIZE];
    int32_t st = -1;
    ot_session_capabilities caps;
    const char *ids[1] = {"x"};
    EXPECT(ot_session_connect(s, "token") == want);
    EXPECT(ot_session_disconnect(s) == want);
    EXPECT(ot_session_get_status(s, &st) == want && st == -1);
    EXPECT(ot_session_get_id(s, buf, sizeof buf) == want);
    EXPECT(ot_session_get_capabilities(s, &caps) == want);
    EXPECT(ot_session_get_connection(s) == NULL);
    EXPECT(ot_session_send_signal(s, "t", "d") == want);
    EXPECT(ot_session_send_signal_to_connection(s, "t", "d", NULL) == want);
    ot_signal_options opts;
    EXPECT(ot_signal_options_default(&opts) == OT_OK && opts.retry_after_reconnect);
    EXPECT(ot_session_send_signal_with_options(s, "t", "d", NULL, &opts) == want);
    ot_bool reconnecting = -1;
    EXPECT(ot_session_is_reconnecting(s, &reconnecting) == want && reconnecting == -1);
    EXPECT(ot_session_force_mute_all(s, ids, 1) == want);
    EXPECT(ot_session_force_mute_stream(s, "x") == want);
    EXPECT(ot_session_disable_force_mute(s) == want);
    EXPECT(ot_session_force_disconnect(s, NULL) == want);
    EXPECT(ot_session_report_issue(s, "d", buf, sizeof buf) == want);
    EXPECT(ot_session_set_encryption_secret(s, "a secret of 8+ characters") == want);
    ot_bool encrypted = -1;
    EXPECT(ot_session_is_end_to_end_encrypted(s, &encrypted) == want && encrypted == -1);
    EXPECT(ot_session_delete(s) == want);
}

static void expect_server_calls(ot_server *sv, ot_status want) {
    char buf[OT_TOKEN_BUFFER_SIZE];
    int32_t port = -1;
    EXPECT(ot_server_start(sv, &port) == want && port == -1);
    EXPECT(ot_server_get_url(sv, buf, sizeof buf) == want);
    EXPECT(ot_server_create_session(sv, OT_FALSE, buf, sizeof buf) == want);
    EXPECT(ot_server_create_session_with_options(sv, OT_FALSE, OT_TRUE, buf, sizeof buf) == want);
    EXPECT(ot_server_new_token(sv, "1_x", OT_ROLE_PUBLISHER, NULL, OT_TOKEN_JWT, buf, sizeof buf) == want);
    EXPECT(ot_server_reload_tls(sv) == want);
    EXPECT(ot_server_stop(sv) == want);
    EXPECT(ot_server_delete(sv) == want);
}

static void test_bad_handles(void) {
    static const ot_session_callbacks no_callbacks;
    expect_session_calls(NULL, OT_ERR_INVALID_PARAM);
    expect_session_calls((ot_session *)(uintptr_t)0x4242, OT_ERR_INVALID_HANDLE);
    expect_server_calls(NULL, OT_ERR_INVALID_PARAM);
    expect_server_calls((ot_server *)(uintptr_t)0x4242, OT_ERR_INVALID_HANDLE);

    /* A deleted handle is refused, and so is a handle of another type. */
    ot_session *s = ot_session_new("123", "1_session", &no_callbacks);
    EXPECT(s != NULL);
    EXPECT(ot_session_delete(s) == OT_OK);
    expect_session_calls(s, OT_ERR_INVALID_HANDLE);
    ot_server *sv = ot_server_new(NULL, 0, "123", "abcdef");
    EXPECT(sv != NULL);
    expect_session_calls((ot_session *)(void *)sv, OT_ERR_INVALID_HANDLE);
    EXPECT(ot_server_delete(sv) == OT_OK);
    expect_server_calls(sv, OT_ERR_INVALID_HANDLE);

    /* Constructors refuse NULL and out-of-range arguments with NULL. */
    EXPECT(ot_session_new(NULL, "1_s", &no_callbacks) == NULL);
    EXPECT(ot_session_new("123", NULL, &no_callbacks) == NULL);
    EXPECT(ot_session_new("123", "1_s", NULL) == NULL);
    EXPECT(ot_session_new("", "1_s", &no_callbacks) == NULL);
    EXPECT(ot_server_new(NULL, 70000, "k", "s") == NULL);
    EXPECT(ot_server_new(NULL, -1, "k", "s") == NULL);
    EXPECT(ot_server_new(NULL, 0, NULL, "s") == NULL);
    /* Api keys and secrets are checked as ot-server checks them; hosts must be IPv4 addresses or localhost. */
    EXPECT(ot_server_new(NULL, 0, "bad key", "s") == NULL);
    EXPECT(ot_server_new(NULL, 0, "k:x", "s") == NULL);
    EXPECT(ot_server_new(NULL, 0, "", "s") == NULL);
    EXPECT(ot_server_new(NULL, 0, "k", "") == NULL);
    EXPECT(ot_server_new(NULL, 0, "k", "abc.key") == NULL);
    EXPECT(ot_server_new(NULL, 0, "12345678901234567890123456789012345678901234567890123456789012345", "s") == NULL);
    EXPECT(ot_server_new("example.com", 0, "k", "s") == NULL);
    EXPECT(ot_server_new("", 0, "k", "s") == NULL);
    EXPECT(ot_session_settings_default(NULL) == OT_ERR_INVALID_PARAM);
    ot_publisher_settings ps;
    EXPECT(ot_publisher_settings_default(&ps) == OT_OK && ps.audio_fallback_enabled == 1 && ps.publish_video == 1);
    EXPECT(ot_session_settings_validate(NULL) == OT_ERR_INVALID_PARAM);
    {
        /* ICE settings: bad URLs, NULL arrays and unknown enum values are refused, never a crash. */
        ot_session_settings st;
        EXPECT(ot_session_settings_default(&st) == OT_OK);
        EXPECT(ot_session_settings_validate(&st) == OT_OK);
        ot_ice_server good[2] = {{"stun:127.0.0.1:3478", NULL, NULL}, {"turn:[::1]:3479?transport=udp", "u", "p"}};
        st.ice_servers = good;
        st.ice_server_count = 2;
        st.ice_transport_policy = OT_ICE_TRANSPORT_RELAY;
        st.ice_filter_out_lan_candidates = 1;
        EXPECT(ot_session_settings_validate(&st) == OT_OK);
        ot_session *ok = ot_session_new_with_settings("123", "1_s", &no_callbacks, &st);
        EXPECT(ok != NULL);
        EXPECT(ot_session_delete(ok) == OT_OK);
        ot_ice_server bad[1] = {{"stun://nowhere", NULL, NULL}};
        st.ice_servers = bad;
        st.ice_server_count = 1;
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
        EXPECT(ot_session_new_with_settings("123", "1_s", &no_callbacks, &st) == NULL);
        bad[0].url = NULL;
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
        st.ice_servers = NULL;
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
        st.ice_server_count = 0;
        st.ice_transport_policy = 7;
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
        st.ice_transport_policy = OT_ICE_TRANSPORT_ALL;
        st.ice_include_servers = -1;
        EXPECT(ot_session_new_with_settings("123", "1_s", &no_callbacks, &st) == NULL);
        /* The server URL is checked at creation too. */
        st.ice_include_servers = OT_ICE_INCLUDE_SERVERS_ALL;
        st.server_url = "ws://127.0.0.1:8080";
        EXPECT(ot_session_settings_validate(&st) == OT_OK);
        st.server_url = "ftp://127.0.0.1";
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
        st.server_url = "ws://127.0.0.1:99999";
        EXPECT(ot_session_new_with_settings("123", "1_s", &no_callbacks, &st) == NULL);
        /* TLS and a proxy: wss/https URLs with names, a CA file (read at connect), an http:// proxy only. */
        st.server_url = "wss://ot.example.org";
        EXPECT(st.tls_ca_file == NULL && st.proxy_url == NULL);
        st.tls_ca_file = "/etc/ssl/certs/ca-certificates.crt";
        st.proxy_url = "http://user:pw@proxy.example.org:3128";
        EXPECT(ot_session_settings_validate(&st) == OT_OK);
        st.proxy_url = "https://proxy.example.org";
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
        st.proxy_url = NULL;
        st.tls_ca_file = "";
        EXPECT(ot_session_settings_validate(&st) == OT_ERR_INVALID_PARAM);
    }

    /* Server options: TLS files go together, ICE URLs are checked, a TURN URL needs the shared secret. */
    {
        ot_server_options o;
        EXPECT(ot_server_options_default(NULL) == OT_ERR_INVALID_PARAM);
        EXPECT(ot_server_options_default(&o) == OT_OK && o.turn_credential_ttl_s == 86400 && o.host == NULL && o.media_workers == 1);
        EXPECT(ot_server_new_with_options(NULL) == NULL);
        EXPECT(ot_server_new_with_options(&o) == NULL); /* no project */
        o.api_key = "123";
        o.api_secret = "abcdef";
        const char *urls[] = {"stun:stun.example.org", "turn:turn.example.org?transport=tcp"};
        o.ice_server_urls = urls;
        o.ice_server_url_count = 2;
        EXPECT(ot_server_new_with_options(&o) == NULL); /* turn: without turn_secret */
        o.turn_secret = "north-wind";
        o.tls_cert_file = "/nonexistent.pem";
        EXPECT(ot_server_new_with_options(&o) == NULL); /* a certificate without its key */
        o.tls_cert_file = NULL;
        o.media_advertise = "not-an-ip";
        EXPECT(ot_server_new_with_options(&o) == NULL);
        o.media_advertise = "203.0.113.7";
        o.media_workers = 0;
        EXPECT(ot_server_new_with_options(&o) == NULL);   /* 1..64 media workers */
        o.media_workers = 65;
        EXPECT(ot_server_new_with_options(&o) == NULL);
        o.media_workers = 64;
        ot_server *sv2 = ot_server_new_with_options(&o);
        EXPECT(sv2 != NULL);
        EXPECT(ot_server_reload_tls(sv2) == OT_ERR_ILLEGAL_STATE); /* no TLS */
        EXPECT(ot_server_delete(sv2) == OT_OK);
        o.tls_cert_file = "/nonexistent.pem";
        o.tls_key_file = "/nonexistent.key";
        sv2 = ot_server_new_with_options(&o);
        EXPECT(sv2 != NULL);
        EXPECT(ot_server_start(sv2, NULL) == OT_ERR_INVALID_PARAM); /* the files are read at start */
        EXPECT(ot_server_delete(sv2) == OT_OK);
    }

    /* Streams and connections. */
    ot_stream_info si;
    ot_connection_info ci;
    EXPECT(ot_stream_get_info(NULL, &si) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_stream_get_info((const ot_stream *)(uintptr_t)0x4242, &si) == OT_ERR_INVALID_HANDLE);
    EXPECT(ot_stream_get_id(NULL) == NULL);
    EXPECT(ot_stream_copy(NULL) == NULL);
    EXPECT(ot_stream_delete(NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_stream_delete((ot_stream *)(uintptr_t)0x4242) == OT_ERR_INVALID_HANDLE);
    EXPECT(ot_connection_get_info(NULL, &ci) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_connection_get_info((const ot_connection *)(uintptr_t)0x4242, &ci) == OT_ERR_INVALID_HANDLE);
    EXPECT(ot_connection_get_id(NULL) == NULL);
    EXPECT(ot_connection_copy(NULL) == NULL);
    EXPECT(ot_connection_delete(NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_connection_delete((ot_connection *)(uintptr_t)0x4242) == OT_ERR_INVALID_HANDLE);

    /* Tokens: bad role, bad format, short buffer, session of another key. */
    char tok[OT_TOKEN_BUFFER_SIZE];
    EXPECT(ot_token_new("123", "secret", "1_x", 9, NULL, OT_TOKEN_JWT, tok, sizeof tok) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_token_new("123", "secret", "1_x", OT_ROLE_PUBLISHER, NULL, 5, tok, sizeof tok) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_token_new(NULL, "secret", "1_x", OT_ROLE_PUBLISHER, NULL, OT_TOKEN_JWT, tok, sizeof tok) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_token_new("123", "secret", "1_x", OT_ROLE_PUBLISHER, NULL, OT_TOKEN_JWT, NULL, 0) == OT_ERR_INVALID_PARAM);

    /* OT_TOKEN_BUFFER_SIZE holds the longest token: 1000 characters of connection data of 4 UTF-8 bytes each. */
    ot_server *minter = ot_server_new(NULL, 0, "123", "abcdef");
    char sid[OT_ID_BUFFER_SIZE];
    EXPECT(minter != NULL && ot_server_create_session(minter, OT_FALSE, sid, sizeof sid) == OT_OK);
    static char data[4 * 1001 + 1];
    for (int i = 0; i < 1000; i++) memcpy(data + 4 * i, "\xF0\x9F\x98\x80", 4);
    data[4 * 1000] = 0;
    for (int format = OT_TOKEN_JWT; format <= OT_TOKEN_T1; format++) {
        EXPECT(ot_token_new("123", "abcdef", sid, OT_ROLE_MODERATOR, data, format, tok, sizeof tok) == OT_OK);
        EXPECT(strlen(tok) > 4096);
        char small[4096];
        EXPECT(ot_token_new("123", "abcdef", sid, OT_ROLE_MODERATOR, data, format, small, sizeof small) == OT_ERR_BUFFER_TOO_SMALL);
    }
    memcpy(data + 4 * 1000, "\xF0\x9F\x98\x80", 4);
    data[4 * 1001] = 0;
    EXPECT(ot_token_new("123", "abcdef", sid, OT_ROLE_PUBLISHER, data, OT_TOKEN_T1, tok, sizeof tok) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_server_delete(minter) == OT_OK);
}

/* Devices: enumeration handles, kinds, indexes; a camera that does not exist; the speaker on a bad session. */
static void test_devices(void) {
    static const ot_publisher_callbacks no_pub_callbacks;
    ot_device_list *list = (ot_device_list *)(uintptr_t)0x4242;
    size_t count = 0;
    ot_device_info info;
    ot_camera_mode mode;
    EXPECT(ot_device_list_new(0, &list) == OT_ERR_INVALID_PARAM && list == (ot_device_list *)(uintptr_t)0x4242);
    EXPECT(ot_device_list_new(OT_DEVICE_CAMERA, NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_count(NULL, &count) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_count((const ot_device_list *)(uintptr_t)0x4242, &count) == OT_ERR_INVALID_HANDLE);
    EXPECT(ot_device_list_delete(NULL) == OT_ERR_INVALID_PARAM);
    /* Cameras never need a server: a list (maybe empty), indexes past its end refused. */
    EXPECT(ot_device_list_new(OT_DEVICE_CAMERA, &list) == OT_OK && list != NULL);
    EXPECT(ot_device_list_count(list, &count) == OT_OK);
    EXPECT(ot_device_list_count(list, NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_get(list, count, &info) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_get(list, (size_t)-1, &info) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_get_camera_mode(list, count, 0, &mode) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_get(list, 0, NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_device_list_delete(list) == OT_OK);
    EXPECT(ot_device_list_delete(list) == OT_ERR_INVALID_HANDLE);
    EXPECT(ot_device_list_count(list, &count) == OT_ERR_INVALID_HANDLE);
    /* Audio lists need a sound server: a list, or OT_ERR_DEVICE_UNAVAILABLE and no list. */
    list = NULL;
    ot_status st = ot_device_list_new(OT_DEVICE_SPEAKER, &list);
    EXPECT((st == OT_OK && list != NULL) || (st == OT_ERR_DEVICE_UNAVAILABLE && list == NULL));
    if (list) EXPECT(ot_device_list_delete(list) == OT_OK);
    /* A camera that does not exist: no publisher. */
    ot_publisher_settings ps;
    EXPECT(ot_publisher_settings_default(&ps) == OT_OK && ps.camera == NULL && ps.microphone == NULL);
    ps.video_source = OT_VIDEO_SOURCE_CAMERA;
    ps.camera = "/nonexistent/video9";
    EXPECT(ot_publisher_new(&ps, &no_pub_callbacks) == NULL);
    EXPECT(ot_session_set_speaker(NULL, NULL) == OT_ERR_INVALID_PARAM);
    EXPECT(ot_session_set_speaker((ot_session *)(uintptr_t)0x4242, "x") == OT_ERR_INVALID_HANDLE);
    EXPECT(strcmp(ot_status_message(OT_ERR_DEVICE_LOST), "unknown status code") != 0);
}

int main(void) {
    test_global();
    test_bad_handles();
    test_devices();
    if (failures) { fprintf(stderr, "abi_test: %d failed\n", failures); return 1; }
    printf("abi_test: all passed\n");
    return 0;
}
