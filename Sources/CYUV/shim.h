/* libyuv (Debian libyuv-dev): pixel-format conversion, scaling and MJPEG decoding.
 * Only the C-callable headers: libyuv.h would also pull in mjpeg_decoder.h, which is C++. */
#include <libyuv/convert.h>
#include <libyuv/scale.h>
#include <libyuv/planar_functions.h>
