#define BOOST_TEST_MODULE net_request
#include <boost/test/unit_test.hpp>
