/* V4L2 capture: the VIDIOC_* request numbers are function-like macros Swift cannot import, and ioctl is variadic.
 * Every call retries on EINTR and returns 0 or an errno value. */
#ifndef OT_SHIMS_V4L2_H
#define OT_SHIMS_V4L2_H
#include <linux/videodev2.h>

/** open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC): a descriptor, or -1 with errno set. */
int otshim_v4l2_open(const char *path);
int otshim_v4l2_querycap(int fd, struct v4l2_capability *cap);
int otshim_v4l2_enum_fmt(int fd, struct v4l2_fmtdesc *desc);
int otshim_v4l2_enum_framesizes(int fd, struct v4l2_frmsizeenum *size);
int otshim_v4l2_enum_frameintervals(int fd, struct v4l2_frmivalenum *interval);
int otshim_v4l2_s_fmt(int fd, struct v4l2_format *format);
int otshim_v4l2_s_parm(int fd, struct v4l2_streamparm *parm);
int otshim_v4l2_reqbufs(int fd, struct v4l2_requestbuffers *request);
int otshim_v4l2_querybuf(int fd, struct v4l2_buffer *buffer);
int otshim_v4l2_qbuf(int fd, struct v4l2_buffer *buffer);
int otshim_v4l2_dqbuf(int fd, struct v4l2_buffer *buffer);
/** VIDIOC_STREAMON / VIDIOC_STREAMOFF for video capture. */
int otshim_v4l2_stream(int fd, int on);
/** The fourcc of four characters (v4l2_fourcc). */
unsigned int otshim_v4l2_fourcc(char a, char b, char c, char d);
#endif
