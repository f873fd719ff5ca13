#include "fm/fm_int.h"
