#include "ot_shims_codec.h"

int ot_opus_encoder_set(OpusEncoder *enc, int request, int value) { return opus_encoder_ctl(enc, request, value); }
int ot_opus_encoder_get(OpusEncoder *enc, int request, int *out) { return opus_encoder_ctl(enc, request, out); }
int ot_opus_decoder_get(OpusDecoder *dec, int request, int *out) { return opus_decoder_ctl(dec, request, out); }
vpx_codec_err_t ot_vpx_control_int(vpx_codec_ctx_t *ctx, int id, int value) { return vpx_codec_control_(ctx, id, value); }
vpx_codec_err_t ot_vpx_frame_corrupted(vpx_codec_ctx_t *ctx, int *out) { return vpx_codec_control_(ctx, VP8D_GET_FRAME_CORRUPTED, out); }
vpx_codec_err_t ot_vpx_enc_init(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg, vpx_codec_flags_t flags) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp8_cx(), cfg, flags);
}
vpx_codec_err_t ot_vpx_dec_init(vpx_codec_ctx_t *ctx, const vpx_codec_dec_cfg_t *cfg, vpx_codec_flags_t flags) {
    return vpx_codec_dec_init(ctx, vpx_codec_vp8_dx(), cfg, flags);
}
vpx_codec_iface_t *ot_vpx_vp8_cx(void) { return vpx_codec_vp8_cx(); }
vpx_codec_iface_t *ot_vpx_vp8_dx(void) { return vpx_codec_vp8_dx(); }
